from __future__ import annotations

import base64
import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
import soundfile

from harness.reports.analysis import analyse
from harness.reports.writing import write_report
from tests.conftest import load_runs, write_tiny_dataset
from tests.harness.reports._runs import pointwise_records, tiny_scores, write_run
from tests.support.chromium import CHROMIUM, FLAGS

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


def report_data(html: str) -> dict[str, Any]:
    """The dialogue browser's data: the JSON in <script id="report-data">."""
    match = re.search(
        r'<script type="application/json" id="report-data">(.*?)</script>', html, re.S
    )
    assert match is not None
    data: dict[str, Any] = json.loads(match.group(1))
    return data


def test_html_is_escaped_and_has_no_network_assets(tmp_path: Path) -> None:
    html = make_report(tmp_path).read_text()
    assert SCRIPT not in html
    block = html.split('id="report-data">')[1].split("</script>")[0]
    assert "<" not in block and "\\u003cscript\\u003ealert" in block  # escaped in the JSON
    answers = [a["raw"] for item in report_data(html)["items"] for a in item["answers"]]
    assert SCRIPT in answers  # and the page shows it as text (test_report_in_chromium)
    assert "http://" not in html and "https://" not in html
    parsed = _parse(html)
    images = [attrs["src"] or "" for attrs in parsed.find("img")]
    assert len(images) == 2 and all(src.startswith("data:image/png;base64,") for src in images)
    assert not [
        a for a in parsed.find("link") + parsed.find("script") if a.get("src") or a.get("href")
    ]


def test_audio_sources_are_relative_to_the_report_once_per_clip(tmp_path: Path) -> None:
    report = make_report(tmp_path)
    sources = report_data(report.read_text())["audio"]
    assert len(sources) == 4 * N_ITEMS
    assert sources["c0_0"].startswith("../data%20set/audio/")
    for src in sources.values():
        target = (report.parent / unquote(src)).resolve()
        assert target.is_file() and target.parent == (tmp_path / "data set" / "audio").resolve()


def test_the_page_says_where_its_audio_is(tmp_path: Path) -> None:
    """Issue 47 #18: a page that links its audio by relative path said it had no external
    assets; it says the audio is linked (moved alone, it plays nothing) unless embedded."""
    linked = make_report(tmp_path / "linked").read_text()
    assert "no external assets" not in linked
    assert "links its audio" in linked and "--embed-audio" in linked
    assert "no external assets" in make_report(tmp_path / "embedded", embed_audio=True).read_text()


def test_audio_can_be_embedded_as_a_compressed_preview(tmp_path: Path) -> None:
    report = make_report(tmp_path, embed_audio=True)
    src = report_data(report.read_text())["audio"]["c0_3"]
    prefix = "data:audio/ogg;base64,"
    assert src.startswith(prefix)
    samples, rate = soundfile.read(io.BytesIO(base64.b64decode(src[len(prefix) :])))
    assert samples.ndim == 1 and len(samples) / rate == pytest.approx(0.5, abs=0.02)


def test_embedded_audio_is_deduplicated_and_small(tmp_path: Path) -> None:
    """Ten dialogues share the same four 5-second clips: each clip is in the file once, as
    Ogg Opus, a fraction of the WAV bytes of even one copy of each clip."""
    dataset = write_tiny_dataset(tmp_path / "data", n_items=1, seconds=5.0)
    (first,) = [json.loads(line) for line in (dataset / "items.jsonl").read_text().splitlines()]
    items = [{**first, "id": f"d{i}"} for i in range(10)]
    (dataset / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    scores = {f"d{i}": tiny_scores(1)["d0"] for i in range(10)}
    run = write_run(tmp_path / "results" / "shared", dataset, pointwise_records(scores))
    write_report(analyse(load_runs([run])), tmp_path / "report", embed_audio=True)
    html = (tmp_path / "report" / "report.html").read_text()
    wav_bytes = sum(p.stat().st_size for p in (dataset / "audio").glob("*.wav"))
    embedded = re.findall(r"data:audio/ogg;base64,([A-Za-z0-9+/=]+)", html)
    assert len(embedded) == html.count("data:audio/") == 4
    audio_bytes = sum(len(base64.b64decode(data)) for data in embedded)
    assert audio_bytes < wav_bytes / 4, (audio_bytes, wav_bytes)


def test_items_carry_flags_and_candidates_in_human_order(tmp_path: Path) -> None:
    items = {item["id"]: item for item in report_data(make_report(tmp_path).read_text())["items"]}
    assert len(items) == N_ITEMS
    for i in range(N_ITEMS):
        assert items[f"d{i}"]["disagree"] == ([0] if i >= 6 else [])
        assert items[f"d{i}"]["parse_failure"] == (i == 0)
        # The dataset lists d<i>'s candidates in reverse; the page follows the human ranking.
        assert [c["id"] for c in items[f"d{i}"]["candidates"]] == [f"c{i}_{j}" for j in range(4)]
        assert [c["rank"] for c in items[f"d{i}"]["candidates"]] == [1, 2, 3, 4]


# ------------------------------------------------------------------------ in Chromium


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
    if page.locator(selector).count() == 0:  # a clip's player is drawn when asked for
        page.locator("button.play").first.click()
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


def test_report_in_chromium_reads_at_benchmark_scale(page: Any, tmp_path: Path) -> None:
    """1,200 dialogues: one page of them in the DOM at a time, search, pagination, a deep
    link, and run columns headed by their full labels."""
    n = 1200
    dataset = write_tiny_dataset(tmp_path / "data", n_items=n, seconds=0.02)
    long_a = {"name": "mock", "model": "m", "label": "gemini_gemini-2.5-pro_zero_shot_full_audio"}
    long_b = {"name": "mock", "model": "m", "label": "gemini_gemini-2.5-pro_cot_full_audio"}
    answers = {"c0_1": "reasoning " * 400 + '{"score": 3}'}
    a = write_run(
        tmp_path / "r" / "a",
        dataset,
        pointwise_records(tiny_scores(n), raw=answers),
        provider=long_a,
    )
    b = write_run(
        tmp_path / "r" / "b",
        dataset,
        pointwise_records(tiny_scores(n, reverse=True)),
        provider=long_b,
    )
    write_report(analyse(load_runs([a, b])), tmp_path / "report")
    page.goto((tmp_path / "report" / "report.html").as_uri())

    assert page.locator("article.item").count() == 25
    assert _visible_items(page)[:2] == ["d0", "d1"]
    assert page.locator("#page-info").inner_text().startswith("page 1 of 48")
    page.click("#next-page")
    assert _visible_items(page)[0] == "d25"
    page.select_option("#page-size", "100")
    assert page.locator("article.item").count() == 100 and _visible_items(page)[0] == "d0"
    page.fill("#search", "d1199")
    assert _visible_items(page) == ["d1199"]
    assert page.locator("#shown-count").inner_text() == f"1 of {n} dialogues shown"
    page.fill("#search", "HELLO 119")  # case-insensitive, in the turns: d119, d1190-d1199
    assert len(_visible_items(page)) == 11
    page.fill("#search", "")
    page.check("#filter-disagree")
    page.select_option("#filter-run", "0")
    assert _visible_items(page) == []  # run a agrees with the human everywhere
    page.uncheck("#filter-disagree")
    page.goto("about:blank")
    page.goto((tmp_path / "report" / "report.html").as_uri() + "#item-d600")
    page.wait_for_function("document.getElementById('item-d600') !== null")
    assert page.locator("#page-info").inner_text().startswith("page 25 of 48")

    # Run columns: the full labels, wrapping (never cut to stubs that look alike).
    headers = page.locator("#item-d600 th.run")
    assert [headers.nth(i).inner_text() for i in range(2)] == [long_a["label"], long_b["label"]]
    # Candidates in the human's order; the raw answer full-width and left-aligned.
    page.fill("#search", "d0")
    ranks = page.locator("#item-d0 table.candidates tbody tr td:first-child").all_inner_texts()
    assert ranks == ["1", "2", "3", "4"]
    page.locator("#item-d0 details", has_text="clip c0_1").first.locator("summary").click()
    widths = page.eval_on_selector(
        "#item-d0",
        """a => ({article: a.clientWidth, pre: a.querySelector('details[open] pre').clientWidth,
                 align: getComputedStyle(a.querySelector('details[open] pre')).textAlign})""",
    )
    assert widths["pre"] > 0.8 * widths["article"] and widths["align"] in ("left", "start")


def test_the_page_has_the_human_row_whole_agreement_headers_and_the_inputs_title(
    tmp_path: Path,
) -> None:
    """Like comparison.md and the terminal: the `human (leave-one-out)` row; the agreement
    table's headers are the full labels (they wrap, never `all-MiniLM-L…n`); the title names
    what is compared, not the --out folder."""
    from typer.testing import CliRunner

    from harness.cli.main import app
    from harness.core.dataset import load_dataset

    sample = Path(__file__).resolve().parents[3] / "data" / "sample"
    items = load_dataset(sample, check_audio=False).items
    paths = []
    for name, reverse in (("all-MiniLM-L6-v2-on-summaries", False), ("my-long-model-name", True)):
        path = tmp_path / name / "predictions.jsonl"
        path.parent.mkdir()
        lines = [
            json.dumps(
                {"item_id": item.id, "ranking": list(item.candidates)[:: -1 if reverse else 1]}
            )
            for item in items
        ]
        path.write_text("\n".join(lines) + "\n")
        paths.append(str(path.parent))
    out = tmp_path / "out-folder"
    args = [
        "report",
        *paths,
        "--dataset",
        str(sample),
        "--out",
        str(out),
        "--n-permutations",
        "100",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    html = (out / "report.html").read_text()
    title = "all-MiniLM-L6-v2-on-summaries, my-long-model-name"
    assert f"<title>{title}</title>" in html and "out-folder</title>" not in html
    comparison = html[
        html.index('id="comparison-table"') : html.index(
            "</table>", html.index('id="comparison-table"')
        )
    ]
    assert "human (leave-one-out)" in comparison
    agreement = html[html.index('id="agreement-table"') :]
    header = agreement[: agreement.index("</thead>")]
    assert "<th>all-MiniLM-L6-v2-on-summaries</th>" in header and "…" not in header


def test_the_browser_s_column_headers_tell_the_runs_apart(tmp_path: Path) -> None:
    """Two models by two prompts: the headers are the full labels (they wrap), not stubs
    such as `gemini…o · cot` and `gemini…h · cot`."""
    dataset = write_tiny_dataset(tmp_path / "data", n_items=4, seconds=0.1)
    sweep = tmp_path / "results" / "sweep"
    for model in ("gemini-2.5-pro", "gemini-2.5-flash"):
        for prompt in ("zero_shot", "cot"):
            records = pointwise_records(tiny_scores(4))
            provider = {"name": "gemini", "model": model}
            write_run(
                sweep / f"{model}-{prompt}", dataset, records, provider=provider, prompt=prompt
            )
    runs = load_runs(sorted(sweep.iterdir()))
    write_report(analyse(runs, None), tmp_path / "report", title="sweep")
    html = (tmp_path / "report" / "report.html").read_text()
    labels = {"gemini-2.5-pro · cot", "gemini-2.5-flash · cot", "gemini-2.5-pro · zero_shot"}
    shown = [run["label"] for run in report_data(html)["runs"]]
    assert labels < set(shown) and len(set(shown)) == 4
    comparison = html[html.index('id="comparison-table"') :]
    assert "…" not in comparison[: comparison.index("</table>")]
