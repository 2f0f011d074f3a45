"""`harness view`: the report of one or several runs served live, re-read when results
change, with audio served by clip id."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.conftest import write_tiny_dataset
from tests.harness.reports._runs import pointwise_records, tiny_scores, write_run

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path, Path]]:
    dataset = write_tiny_dataset(tmp_path / "data", n_items=4, seconds=0.5)
    results = tmp_path / "results"
    port = free_port()
    command = [
        sys.executable, "-c", "from harness.cli.main import app; app()",
        "view", str(results), "--port", str(port),
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if get(url + "/_signature")[0] == 200:
                break
        except OSError:
            time.sleep(0.2)
    else:
        process.kill()
        raise RuntimeError("harness view did not start")
    try:
        yield url, results, dataset
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_view_serves_the_report_and_rereads_results(served: tuple[str, Path, Path]) -> None:
    url, results, dataset = served
    status, page = get(url + "/")
    assert status == 200 and b"No finished runs yet" in page  # nothing there yet
    write_run(results / "sweep" / "first", dataset, pointwise_records(tiny_scores(4)))
    status, page = get(url + "/")
    assert status == 200 and b"<!DOCTYPE html>" in page and b'"label":"first"' in page
    signature = get(url + "/_signature")[1]
    write_run(
        results / "sweep" / "second", dataset, pointwise_records(tiny_scores(4, reverse=True))
    )
    assert get(url + "/_signature")[1] != signature
    page = get(url + "/")[1]
    assert b'"label":"first"' in page and b'"label":"second"' in page
    assert b'"c0_0":"/audio/c0_0"' in page  # each clip once, served by id
    status, audio = get(url + "/audio/" + quote("c0_0", safe=""))
    assert status == 200 and audio == (dataset / "audio" / "c0_0.wav").read_bytes()
    assert get(url + "/audio/nope")[0] == 404


def test_view_page_offers_a_reload_when_a_run_finishes(
    served: tuple[str, Path, Path], tmp_path: Path
) -> None:
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (Debian: apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    url, results, dataset = served
    write_run(results / "first", dataset, pointwise_records(tiny_scores(4)))
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"]
        )
        page = browser.new_page()
        page.goto(url + "/")
        assert page.locator("#comparison-table tbody tr").count() == 1
        page.locator("button.play").first.click()  # a clip's player is drawn when asked for
        page.eval_on_selector("audio", "a => { a.preload = 'metadata'; a.load(); }")
        page.wait_for_function("document.querySelector('audio').readyState >= 1")
        assert page.locator("#live-banner").is_hidden()
        write_run(results / "second", dataset, pointwise_records(tiny_scores(4)))
        sync_api.expect(page.locator("#live-banner")).to_be_visible(timeout=15000)
        page.click("#live-banner a")
        sync_api.expect(page.locator("#comparison-table tbody tr")).to_have_count(2)
        browser.close()


def test_runs_of_two_datasets_are_two_comparisons(tmp_path: Path) -> None:
    """`harness view` of a results folder holding runs of two datasets (MusiCRS pools and
    DialBGM items, say): one comparison each, never one table under one chance line."""
    from harness.reports.server import LiveReport

    small = write_tiny_dataset(tmp_path / "small", n_items=4, seconds=0.2)
    other = write_tiny_dataset(tmp_path / "other", n_items=6, seconds=0.2)
    results = tmp_path / "results"
    write_run(results / "a" / "one", small, pointwise_records(tiny_scores(4)))
    write_run(results / "b" / "two", other, pointwise_records(tiny_scores(6)))
    write_run(results / "b" / "three", other, pointwise_records(tiny_scores(6, reverse=True)))
    page = LiveReport([results]).page()
    first, (second,) = page.html.decode(), page.others
    assert (
        "<title>results: small</title>" in first
        and "<title>results: other</title>" in second.decode()
    )
    for html in (first, second.decode()):
        assert '<a href="/">small</a> · <a href="/group/1">other</a>' in html
    assert first.count("<tr><th>") < second.decode().count("<tr><th>")
