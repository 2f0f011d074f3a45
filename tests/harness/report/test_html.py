from __future__ import annotations

import base64
import shutil
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from harness.report.analysis import analyse
from harness.report.loading import load_runs
from harness.report.writing import write_report
from tests.conftest import write_tiny_dataset
from tests.harness.report._runs import pointwise_records, tiny_scores, write_run

N_ITEMS = 12
SCRIPT = '<script>alert("raw")</script>'


class _Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def find(self, tag: str) -> list[dict[str, str | None]]:
        return [attrs for name, attrs in self.tags if name == tag]


def _parse(html: str) -> _Collect:
    parser = _Collect()
    parser.feed(html)
    return parser


def make_report(root: Path, *, embed_audio: bool = False) -> Path:
    """Run "half" agrees with the human on d0-d5 and is reversed on d6-d11, and one of its
    d0 answers is unparsable (the markup of a script); run "perfect" agrees everywhere."""
    dataset = write_tiny_dataset(root / "data set", n_items=N_ITEMS, seconds=0.5)
    half = tiny_scores(N_ITEMS)
    half |= {k: v for k, v in tiny_scores(N_ITEMS, reverse=True).items() if int(k[1:]) >= 6}
    half["d0"]["c0_1"] = None
    records = pointwise_records(half, raw={"c0_1": SCRIPT})
    sweep = root / "results" / "sweep"
    write_run(sweep / "half", dataset, records)
    write_run(sweep / "perfect", dataset, pointwise_records(tiny_scores(N_ITEMS)))
    runs = load_runs([sweep / "half", sweep / "perfect"])
    out = root / "report"
    write_report(analyse(runs, runs[1]), out, title="sweep", embed_audio=embed_audio)
    return out / "report.html"


def test_html_is_escaped_and_has_no_network_assets(tmp_path: Path) -> None:
    html = make_report(tmp_path).read_text()
    assert SCRIPT not in html
    assert "&lt;script&gt;alert(&#34;raw&#34;)&lt;/script&gt;" in html
    assert "http://" not in html and "https://" not in html
    parsed = _parse(html)
    images = [attrs["src"] or "" for attrs in parsed.find("img")]
    assert len(images) == 2 and all(src.startswith("data:image/png;base64,") for src in images)
    assert not [
        a for a in parsed.find("link") + parsed.find("script") if a.get("src") or a.get("href")
    ]


def test_audio_sources_are_relative_to_the_report(tmp_path: Path) -> None:
    report = make_report(tmp_path)
    sources = [attrs["src"] or "" for attrs in _parse(report.read_text()).find("source")]
    assert len(sources) == 4 * N_ITEMS
    assert sources[0].startswith("../data%20set/audio/")
    for src in sources:
        target = (report.parent / unquote(src)).resolve()
        assert target.is_file() and target.parent == (tmp_path / "data set" / "audio").resolve()


def test_audio_can_be_embedded(tmp_path: Path) -> None:
    report = make_report(tmp_path, embed_audio=True)
    source = _parse(report.read_text()).find("source")[0]
    prefix = "data:audio/wav;base64,"
    assert (source["src"] or "").startswith(prefix) and source["type"] == "audio/wav"
    wav = base64.b64decode((source["src"] or "")[len(prefix) :])
    assert wav == (tmp_path / "data set" / "audio" / "c0_3.wav").read_bytes()  # d0 shows c0_3 first


def test_items_carry_disagreement_and_parse_failure_flags(tmp_path: Path) -> None:
    articles = {
        attrs["data-item"]: attrs
        for attrs in _parse(make_report(tmp_path).read_text()).find("article")
    }
    assert len(articles) == N_ITEMS
    for i in range(N_ITEMS):
        assert articles[f"d{i}"]["data-disagree"] == ("0" if i >= 6 else "")
        assert articles[f"d{i}"]["data-parse-failure"] == ("1" if i == 0 else "0")


# ------------------------------------------------------------------------ in Chromium
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture
def page(tmp_path: Path) -> Any:
    if CHROMIUM is None:
        pytest.skip(
            "chromium is not installed (Debian: apt-get install chromium); browser test skipped"
        )
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=CHROMIUM, headless=True, args=FLAGS
        )
        try:
            yield browser.new_page()
        finally:
            browser.close()


def _visible_items(page: Any) -> list[str]:
    ids: list[str] = page.eval_on_selector_all(
        "article.item",
        "els => els.filter(e => !e.hidden && e.offsetParent !== null).map(e => e.dataset.item)",
    )
    return ids


def _playable(page: Any, selector: str = "audio") -> float:
    page.eval_on_selector(selector, "a => { a.preload = 'metadata'; a.load(); }")
    page.wait_for_function(f"document.querySelector('{selector}').readyState >= 1", timeout=10000)
    duration: float = page.eval_on_selector(selector, "a => a.duration")
    return duration


def test_report_in_chromium(page: Any, tmp_path: Path) -> None:
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(make_report(tmp_path).as_uri())

    # Tables render, with the values the runs imply.
    assert page.locator("#comparison-table tbody tr").count() == 2
    assert (
        page.locator("#comparison-table tbody tr")
        .nth(1)
        .locator("td")
        .nth(1)
        .inner_text()
        .startswith("1.000")
    )  # Hit@1 of "perfect"
    assert page.locator("#paired-table tbody tr").count() == 4
    assert page.locator("#agreement-table tbody tr").count() == 3
    widths = page.eval_on_selector_all("img.figure", "imgs => imgs.map(i => i.naturalWidth)")
    assert len(widths) == 2 and min(widths) > 100

    # Filters.
    every = [f"d{i}" for i in range(N_ITEMS)]
    assert _visible_items(page) == every
    assert page.locator("#shown-count").inner_text() == f"{N_ITEMS} of {N_ITEMS} dialogues shown"
    page.check("#filter-disagree")
    assert _visible_items(page) == every[6:]
    page.select_option("#filter-run", "1")  # "perfect" never disagrees
    assert _visible_items(page) == []
    page.select_option("#filter-run", "0")
    assert _visible_items(page) == every[6:]
    page.uncheck("#filter-disagree")
    page.check("#filter-parse")
    assert _visible_items(page) == ["d0"]
    assert page.locator("#shown-count").inner_text() == f"1 of {N_ITEMS} dialogues shown"
    page.check("#filter-disagree")
    assert _visible_items(page) == []

    # The raw answer shows as text, and the players can load their clip.
    page.uncheck("#filter-disagree")
    page.locator("#item-d0 details", has_text="unparsable").first.locator("summary").click()
    assert SCRIPT in page.locator("#item-d0 pre", has_text="alert").first.inner_text()
    assert _playable(page) == pytest.approx(0.5, abs=0.01)
    assert requests and all(url.startswith(("file:", "data:")) for url in requests), requests


def test_embedded_audio_plays_in_chromium(page: Any, tmp_path: Path) -> None:
    page.goto(make_report(tmp_path, embed_audio=True).as_uri())
    assert _playable(page) == pytest.approx(0.5, abs=0.01)
