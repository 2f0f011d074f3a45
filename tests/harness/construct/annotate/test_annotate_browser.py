"""End to end: `harness annotate` as a process, driven by Debian's headless Chromium."""

from __future__ import annotations

import json
import re
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.construct.annotate.app import presentation_order
from harness.core.dataset import load_dataset
from tests.conftest import write_tiny_dataset
from tests.support.chromium import CHROMIUM, FLAGS

# A mark, not a module-level skip: the tests stay collected (tests/test_collection.py) and skip.
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="chromium is not installed (Debian: apt-get install chromium); browser test skipped",
)
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Server:
    """`harness annotate DATASET` in a subprocess, so a restart is a real one."""

    def __init__(self, dataset: Path, db: Path, *options: str) -> None:
        self.dataset, self.db, self.options = dataset, db, list(options)
        self.process: subprocess.Popen[bytes] | None = None
        self.port = free_port()  # kept across restarts: the page's origin stays the same
        self.url = f"http://127.0.0.1:{self.port}"
        self.printed: list[str] = []
        self.token = ""

    def start(self) -> None:
        port = self.port
        command = [
            sys.executable, "-c", "from harness.cli.main import app; app()",
            "annotate", str(self.dataset), "--port", str(port), "--db", str(self.db),
            "--min-listen", "0.3", *self.options,
        ]  # fmt: skip
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert self.process.stdout is not None
        while not any("/admin?key=" in line for line in self.printed):  # printed before serving
            line = self.process.stdout.readline().decode()
            if not line:
                raise RuntimeError(f"annotate exited early: {''.join(self.printed)}")
            self.printed.append(line)
        found = re.search(r"\?token=(\S+)", "".join(self.printed))
        self.token = found.group(1) if found else ""
        query = f"?token={self.token}" if self.token else ""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"annotate exited early: {''.join(self.printed)}")
            try:
                with urllib.request.urlopen(
                    self.url + "/api/progress" + query, timeout=2
                ) as response:
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


def listen_to_every_clip(page: Any) -> None:
    """Play each clip with the keyboard (arrows choose, Space plays); wait until all unlock."""
    n = page.locator(".card").count()
    for _ in range(n):
        page.keyboard.press("Space")
        page.keyboard.press("ArrowRight")
    page.wait_for_function(f"document.querySelectorAll('.card.listened').length === {n}")


def read_guidelines(page: Any) -> None:
    sync_api.expect(page.locator("#guidelines")).to_be_visible()
    page.click("#guidelines-read")


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
        # The guidelines come first; the task only once they are read.
        sync_api.expect(page.locator("#guidelines-text")).to_contain_text("background music")
        assert not page.locator("#task").is_visible()
        read_guidelines(page)
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

        # A clip can be ranked only once it has been played.
        assert page.locator('input[name="rank-A"]').first.is_disabled()
        page.click("#submit")
        sync_api.expect(page.locator("#message")).to_contain_text("Listen to clip A")
        page.keyboard.press("2")  # the shortcut says so too
        sync_api.expect(page.locator("#message")).to_contain_text("Listen to clip A")
        listen_to_every_clip(page)
        assert not page.locator('input[name="rank-A"]').first.is_disabled()

        # An incomplete or inconsistent ranking is refused before anything is stored, and a
        # message goes as soon as the ranking changes (no stale errors).
        page.click("#submit")
        sync_api.expect(page.locator("#message")).to_contain_text("Give clip A a rank")
        rank_in_order(page, {"A": 1})
        sync_api.expect(page.locator("#message")).to_have_text("")
        rank_in_order(page, {"B": 1, "C": 3, "D": 4})
        page.click("#submit")
        sync_api.expect(page.locator("#message")).to_contain_text("given twice")
        assert stored(server.db) == []

        # Keyboard: the selected clip (clicked, or reached with the arrows) gets the digit.
        page.click("#card-D h3")
        page.keyboard.press("ArrowRight")  # D -> A
        sync_api.expect(page.locator("#card-A")).to_have_class(re.compile("selected"))
        page.keyboard.press("2")
        assert page.locator('input[name="rank-A"][value="2"]').is_checked()
        sync_api.expect(page.locator("#message")).to_have_text("")
        rank_in_order(page, {"B": 1, "C": 4, "D": 3})
        page.keyboard.press("Enter")
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

        # Another annotator reads the guidelines, starts from the beginning and cannot touch
        # alice's rankings.
        page.click("#switch")
        page.fill("#name", "bob")
        page.click("#start")
        read_guidelines(page)
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


def test_study_in_chromium(dataset_dir: Path, tmp_path: Path) -> None:
    """Bound beyond localhost: a token; an annotator arriving from a platform's link reads
    the guidelines, ranks the practice items (with the reference as feedback), ranks every
    item whose clip ids need URL-encoding, and gets the completion code the admin page lists."""
    odd = {f"c{i}_{j}": f"clip {i}/{j}#?&é" for i in range(3) for j in range(4)}
    for name in ("clips.jsonl", "items.jsonl"):
        path = dataset_dir / name
        text = path.read_text()
        for plain, strange in odd.items():
            text = text.replace(json.dumps(plain), json.dumps(strange))
        path.write_text(text)
    practice = write_tiny_dataset(tmp_path / "practice", n_items=1, seconds=0.5)
    guidelines = tmp_path / "guidelines.txt"
    guidelines.write_text("Imagine a quiet cafe. Rank the clips for it.")
    server = Server(
        dataset_dir, tmp_path / "db.sqlite",
        "--host", "0.0.0.0", "--practice", str(practice), "--guidelines", str(guidelines),
        "--admin-key", "the-admin", "--completion-url", "https://platform.test/done?cc={code}",
    )  # fmt: skip
    server.start()
    try:
        assert server.token  # generated, printed in the annotators' link
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(server.url + "/api/progress", timeout=5)
        assert refused.value.code == 403
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch_persistent_context(
                str(tmp_path / "profile"), executable_path=CHROMIUM, headless=True, args=FLAGS
            )
            page = browser.new_page()
            page.goto(f"{server.url}/?token={server.token}&annotator=P0123456789abcdef")
            sync_api.expect(page.locator("#guidelines-text")).to_have_text(
                "Imagine a quiet cafe. Rank the clips for it."
            )
            page.click("#guidelines-read")
            sync_api.expect(page.locator("#stage-badge")).to_have_text("Practice 1 of 1")
            listen_to_every_clip(page)
            rank_in_order(page, {"A": 1, "B": 2, "C": 3, "D": 4})
            page.click("#submit")
            sync_api.expect(page.locator("#feedback-text")).to_contain_text("The reference ranking")
            assert stored(server.db) == []  # practice is kept apart
            page.click("#feedback-next")
            for expected in ("d0", "d1", "d2"):
                # The practice item is also called d0: wait for the task page of a real item
                # (keys pressed while the feedback page shows are ignored).
                sync_api.expect(page.locator("#task")).to_be_visible()
                sync_api.expect(page.locator("#stage-badge")).to_be_hidden()
                sync_api.expect(page.locator("#item-id")).to_have_text(expected)
                listen_to_every_clip(page)  # the players load clips with odd ids
                rank_in_order(page, {"A": 1, "B": 2, "C": 3, "D": 4})
                page.click("#submit")
            code = page.locator("#completion-code")
            sync_api.expect(code).to_have_text(re.compile(r"^[0-9A-F]{10}$"))
            link = page.locator("#completion-url").get_attribute("href")
            assert link == f"https://platform.test/done?cc={code.inner_text()}"
            assert {row[1] for row in stored(server.db)} == {"d0", "d1", "d2"}

            admin = browser.new_page()
            admin.goto(f"{server.url}/admin?key=the-admin")
            row = admin.locator("#annotators tbody tr")
            sync_api.expect(row).to_have_count(1)
            cells = row.locator("td").all_inner_texts()
            assert cells[0] == "P0123456789abcdef" and cells[2:6] == [
                "1 / 1",
                "3 / 3",
                "yes",
                code.inner_text(),
            ]
            browser.close()
    finally:
        server.stop()
