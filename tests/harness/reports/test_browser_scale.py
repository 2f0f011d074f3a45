"""The dialogue browser at pool scale (MuseChat: 500 candidates an item): the page carries and
draws the gold and each run's top K, the rest in compact columns drawn by "show all"; the
DOM of a page of such items stays small. Run ranks: 1 + the candidates scored higher."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from harness.core.records import Record
from harness.reports.analysis import analyse
from harness.reports.browser_data import TOP_K, run_ranks
from harness.reports.html import SIDECAR, SIDECAR_CALLBACK, render_html
from harness.reports.writing import report_figures, write_report
from tests.conftest import load_runs, write_pool_dataset
from tests.harness.reports import test_html
from tests.harness.reports._runs import pointwise_records, write_run
from tests.harness.reports.test_html import report_data

page = test_html.page  # the Chromium page fixture (skips without Chromium)
N_ITEMS, POOL = 30, 200
SCRIPT = '<script>alert("hidden")</script>'


def pool_report(root: Path) -> Path:
    """Run "order" scores each item's pool in dataset order (the first candidate best) as a
    pointwise judge, with a script as the raw answer about q0's last candidate; run "reverse"
    is a scorer that reverses it. Each item's gold are candidates 5, 5+(i+1), 5+2(i+1)."""
    dataset = write_pool_dataset(root / "pool", N_ITEMS, POOL)
    items = [json.loads(line) for line in (dataset / "items.jsonl").read_text().splitlines()]
    order = {it["id"]: {c: float(POOL - j) for j, c in enumerate(it["candidates"])} for it in items}
    last = items[0]["candidates"][-1]
    judged = pointwise_records(order, raw={last: SCRIPT})
    reverse = [
        Record(
            item_id=it["id"],
            candidates=it["candidates"],
            scores={c: -s for c, s in order[it["id"]].items()},
        )
        for it in items
    ]
    write_run(root / "runs" / "order", dataset, judged)
    write_run(root / "runs" / "reverse", dataset, reverse)
    runs = load_runs([root / "runs" / "order", root / "runs" / "reverse"])
    write_report(analyse(runs), root / "report", title="pools")
    return root / "report" / "report.html"


@given(st.lists(st.one_of(st.floats(-5, 5), st.just(float("nan"))), min_size=1, max_size=30))
def test_a_runs_rank_counts_the_candidates_scored_higher(values: list[float]) -> None:
    scores = np.array(values)
    ranks = run_ranks(scores)
    low = np.where(np.isnan(scores), -np.inf, scores)
    assert [int(r) for r in ranks] == [1 + int((low > v).sum()) for v in low]
    both = run_ranks(np.vstack([scores, scores[::-1]]))  # one row per run
    assert (both[0] == ranks).all() and (both[1] == run_ranks(scores[::-1])).all()


def sidecar_data(report: Path) -> dict[str, Any]:
    """What "show all" draws: the JSON inside report-candidates.js next to `report`."""
    text = (report.parent / SIDECAR).read_text()
    prefix, suffix = f"window.{SIDECAR_CALLBACK}(", ");\n"
    assert text.startswith(prefix) and text.endswith(suffix) and "<" not in text
    payload: dict[str, Any] = json.loads(text[len(prefix) : -len(suffix)])
    return payload


def test_the_page_carries_the_gold_and_each_runs_top_k_and_the_rest_in_columns(
    tmp_path: Path,
) -> None:
    report = pool_report(tmp_path)
    data, more = report_data(report.read_text()), sidecar_data(report)
    assert data["top_k"] == TOP_K and data["sidecar"] == SIDECAR and "more" not in data
    for item in data["items"]:
        shown = [c["id"] for c in item["candidates"]]
        rest = more["items"][item["id"]]["ids"]
        assert item["n_more"] == len(rest)
        assert len(shown) + len(rest) == POOL and not set(shown) & set(rest)
        i = int(item["id"][1:])
        gold = [f"s{i + 5 + k * (i + 1)}" for k in range(3)]
        pool = [f"s{j}" for j in range(i, i + POOL)]
        # gold first, then each run's top K (the first and the last K of the pool)
        assert shown[:3] == gold
        assert set(shown[3:]) == set(pool[:TOP_K] + pool[-TOP_K:]) - set(gold)
        by_id = {c["id"]: c for c in item["candidates"]}
        assert by_id[gold[0]]["run_ranks"] == [6, POOL - 5]  # the gold's rank in each run
        assert by_id[pool[0]]["cells"][0] == [f"{POOL:.3g}", 1]
        first_rest = pool.index(rest[0])
        assert more["items"][item["id"]]["ranks"][0][0] == first_rest + 1
        assert all(cid in more["captions"] for cid in rest)
    assert SCRIPT in [a["raw"] for a in data["items"][0]["answers"]]


def test_served_pages_carry_the_rest_inline(tmp_path: Path) -> None:
    """`harness view` serves one page: what "show all" draws is inside it."""
    report = pool_report(tmp_path)
    runs = load_runs([tmp_path / "runs" / "order", tmp_path / "runs" / "reverse"])
    analysis = analyse(runs)
    figures = report_figures(analysis, files=False)
    page, script = render_html(analysis, figures, report.parent, sidecar=False)
    assert script is None
    inline = report_data(page)["more"]
    assert inline["items"] == sidecar_data(report)["items"]
    assert inline["captions"] == sidecar_data(report)["captions"]


ROWS = "#item-{item} table.candidates tbody tr:not(.more-divider)"


def _rows(page: Any, item: str) -> int:
    count: int = page.locator(ROWS.format(item=item)).count()
    return count


def _shown_all(page: Any, item: str) -> int:
    """The rows once "show all" has drawn them (the candidates file loads asynchronously)."""
    rows = ROWS.format(item=item)
    page.wait_for_function(f"document.querySelectorAll('{rows}').length > {3 + 2 * TOP_K}")
    return _rows(page, item)


def test_a_page_of_pool_items_stays_small_and_show_all_draws_the_rest(
    page: Any, tmp_path: Path
) -> None:
    page.goto(pool_report(tmp_path).as_uri())
    assert page.locator("article.item").count() == 25
    limit = 3 + 2 * TOP_K
    assert all(_rows(page, f"q{i}") <= limit for i in range(25))
    elements = page.evaluate("document.getElementsByTagName('*').length")
    assert elements < 25 * limit * 16, elements  # ~11 elements a row; 200 rows an item before
    # One answer block per drawn candidate, not one per candidate of the pool.
    assert page.locator("#item-q0 details").count() == _rows(page, "q0")
    # a pool item off screen is not rendered (content-visibility: auto): no inner text yet
    page.locator("#item-q0").scroll_into_view_if_needed()
    page.wait_for_function("document.querySelector('#item-q0 td').innerText.length > 0")
    assert SCRIPT not in page.locator("#item-q0").inner_text()

    gold = page.locator("#item-q0 tbody tr").first
    assert gold.locator("td").first.inner_text() == "gold"
    assert gold.locator(".run-rank").all_inner_texts() == ["#6", f"#{POOL - 5}"]

    page.click("#item-q0 button.show-all")
    assert _shown_all(page, "q0") == POOL
    assert page.locator("#item-q0 button.show-all").inner_text().startswith("show only")
    hidden = page.locator("#item-q0 tbody tr", has_text=f"s{POOL - TOP_K - 1}")
    assert hidden.locator("td.caption").inner_text() == f"Song number {POOL - TOP_K - 1}"
    assert hidden.locator(".run-rank").all_inner_texts() == [f"#{POOL - TOP_K}", f"#{TOP_K + 1}"]
    # the raw answer about the last candidate, now drawn, shows the script as text
    page.locator("#item-q0 details", has_text=f"clip s{POOL - 1}").locator("summary").click()
    assert SCRIPT in page.locator("#item-q0 details[open] pre").inner_text()
    assert _rows(page, "q1") <= limit  # the other items stay trimmed

    page.click("#item-q0 button.show-all")
    assert _rows(page, "q0") <= limit


def test_show_all_names_a_missing_candidates_file(page: Any, tmp_path: Path) -> None:
    report = pool_report(tmp_path)
    (report.parent / SIDECAR).unlink()
    page.goto(report.as_uri())
    page.click("#item-q0 button.show-all")
    button = page.locator("#item-q0 button.show-all")
    page.wait_for_function("document.querySelector('#item-q0 button.show-all').disabled")
    assert button.inner_text() == f"could not read {SIDECAR} next to this page"
    assert button.is_disabled() and _rows(page, "q0") <= 3 + 2 * TOP_K


def test_the_docs_state_the_trimming_and_the_figure_sizes_the_code_uses() -> None:
    from harness.reports.plots import ANNOTATED, MAX_HEATMAP, MAX_HEIGHT, PAGE_DPI

    root = Path(__file__).resolve().parents[3]
    reports = " ".join((root / "docs" / "reports.md").read_text().split())
    assert f"the gold and each run's top {TOP_K} (the cut-off of the @{TOP_K} metrics)" in reports
    assert f"drawn once for the page, at {PAGE_DPI} dpi" in reports
    assert (
        f"at most {MAX_HEIGHT:g} inches tall, the heatmap {MAX_HEATMAP:g} inches a side" in reports
    )
    assert f"in the cells up to {ANNOTATED} rankers" in reports


def test_show_all_of_a_served_page_draws_the_rest_from_the_page(page: Any, tmp_path: Path) -> None:
    report = pool_report(tmp_path)
    (report.parent / SIDECAR).unlink()  # the served page needs none
    runs = load_runs([tmp_path / "runs" / "order", tmp_path / "runs" / "reverse"])
    analysis = analyse(runs)
    figures = report_figures(analysis, files=False)
    served, _ = render_html(analysis, figures, report.parent, sidecar=False)
    report.write_text(served)
    page.goto(report.as_uri())
    page.click("#item-q1 button.show-all")
    assert _shown_all(page, "q1") == POOL
