"""End to end: `harness annotate` as a process, driven by Debian's headless Chromium."""

from __future__ import annotations

import json
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.annotate.app import presentation_order
from harness.dataset import load_dataset

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    pytest.skip(
        "chromium is not installed (Debian: apt-get install chromium); browser test skipped",
        allow_module_level=True,
    )
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")

FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Server:
    """`harness annotate DATASET` in a subprocess, so a restart is a real one."""

    def __init__(self, dataset: Path, db: Path) -> None:
        self.dataset, self.db = dataset, db
        self.process: subprocess.Popen[bytes] | None = None
        self.port = free_port()  # kept across restarts: the page's origin stays the same
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        port = self.port
        command = [
            sys.executable, "-c", "from harness.cli import app; app()",
            "annotate", str(self.dataset), "--port", str(port), "--db", str(self.db),
        ]  # fmt: skip
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                output = self.process.stdout.read().decode() if self.process.stdout else ""
                raise RuntimeError(f"annotate exited early: {output}")
            try:
                with urllib.request.urlopen(self.url + "/api/progress", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("annotate did not start within 60 s")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=30)
            self.process = None


@pytest.fixture
def dataset_dir(tiny_dataset: Path) -> Path:
    lines = (tiny_dataset / "items.jsonl").read_text().splitlines()
    items = [{k: v for k, v in json.loads(x).items() if k != "human_ranking"} for x in lines]
    (tiny_dataset / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    return tiny_dataset


@pytest.fixture
def server(dataset_dir: Path, tmp_path: Path) -> Iterator[Server]:
    running = Server(dataset_dir, tmp_path / "rankings.sqlite")
    running.start()
    yield running
    running.stop()


def stored(db: Path) -> list[tuple[str, str, list[str]]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT annotator, item_id, ranking FROM rankings ORDER BY 1, 2")
        return [(a, i, json.loads(r)) for a, i, r in rows]


def rank_in_order(page: Any, ranks: dict[str, int]) -> None:
    for label, rank in ranks.items():
        page.check(f'input[name="rank-{label}"][value="{rank}"]')


def test_annotate_in_chromium(server: Server, dataset_dir: Path, tmp_path: Path) -> None:
    dataset = load_dataset(dataset_dir)
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=CHROMIUM, headless=True, args=FLAGS
        )
        page = browser.new_page()
        page.goto(server.url + "/")
        page.fill("#name", "alice")
        page.click("#start")
        sync_api.expect(page.locator("#item-id")).to_have_text("d0")
        assert page.locator("audio").count() == 4
        assert page.locator("#dialogue").inner_text().startswith("A: Hello 0")
        # Captions are hidden until asked for.
        captions = page.locator(".caption")
        assert all(not captions.nth(i).is_visible() for i in range(4))
        page.check("#show-captions")
        sync_api.expect(captions.first).to_be_visible()
        page.uncheck("#show-captions")
        sync_api.expect(captions.first).to_be_hidden()
        # The players can load the clip.
        page.eval_on_selector("audio", "a => { a.preload = 'metadata'; a.load(); }")
        page.wait_for_function("document.querySelector('audio').readyState >= 1")
        assert page.eval_on_selector("audio", "a => a.duration") == pytest.approx(0.5, abs=0.01)

        # An incomplete or inconsistent ranking is refused before anything is stored.
        page.click("#submit")
        sync_api.expect(page.locator("#message")).to_contain_text("Give clip A a rank")
        rank_in_order(page, {"A": 1, "B": 1, "C": 3, "D": 4})
        page.click("#submit")
        sync_api.expect(page.locator("#message")).to_contain_text("given twice")
        assert stored(server.db) == []

        rank_in_order(page, {"A": 2, "B": 1, "C": 4, "D": 3})
        page.click("#submit")
        sync_api.expect(page.locator("#item-id")).to_have_text("d1")
        sync_api.expect(page.locator("#progress")).to_have_text("1 / 3 done")
        shown = presentation_order("alice", dataset.item("d0"))
        assert stored(server.db) == [("alice", "d0", [shown[1], shown[0], shown[3], shown[2]])]

        # A reload resumes at the next item; so does a restart of the server, and a fresh
        # browser profile once the annotator gives their name again.
        page.reload()
        sync_api.expect(page.locator("#item-id")).to_have_text("d1")
        server.stop()
        server.start()
        page.goto(server.url + "/")
        sync_api.expect(page.locator("#item-id")).to_have_text("d1")
        fresh = playwright.chromium.launch_persistent_context(
            str(tmp_path / "profile2"), executable_path=CHROMIUM, headless=True, args=FLAGS
        )
        other_page = fresh.new_page()
        other_page.goto(server.url + "/")
        other_page.fill("#name", "alice")
        other_page.click("#start")
        sync_api.expect(other_page.locator("#item-id")).to_have_text("d1")
        fresh.close()

        # Another annotator starts from the beginning and cannot touch alice's rankings.
        page.click("#switch")
        page.fill("#name", "bob")
        page.click("#start")
        sync_api.expect(page.locator("#item-id")).to_have_text("d0")
        statuses = page.evaluate(
            """async (item) => {
                const post = (body) => fetch('/api/rankings', {method: 'POST',
                    headers: {'Content-Type': 'application/json'}, body: JSON.stringify(body)})
                    .then(r => r.status);
                return [
                    await post({annotator: 'alice', item_id: 'd0', ranking: item.reversed}),
                    await post({annotator: 'bob', item_id: 'd0', ranking: item.short}),
                    await post({annotator: 'bob', item_id: 'zzz', ranking: item.reversed}),
                ];
            }""",
            {"reversed": list(shown[::-1]), "short": list(shown[:2])},
        )
        assert statuses == [409, 400, 400]
        assert [row[:2] for row in stored(server.db)] == [("alice", "d0")]
        browser.close()
