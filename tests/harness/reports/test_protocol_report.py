"""`harness report` on the protocols' runs: a refine run's turns, turn gain and SR@K in
comparison.md, its picks and the user's reply in the HTML browser; a describe run's
description metrics, and its descriptions beside the human top clip's caption."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from harness.core.records import Record
from harness.reports.analysis import analyse
from harness.reports.writing import write_report
from tests.conftest import load_runs, write_tiny_dataset
from tests.harness.reports import test_html
from tests.harness.reports._runs import write_run
from tests.harness.reports.test_html import report_data

page = test_html.page  # the Chromium page fixture (skips without Chromium)
N_ITEMS = 4
REPLY = "Not quite. I would like something with <b>tone</b>, and without drums."


def refine_records() -> list[Record]:
    """Turn 1 puts the human's third clip first; turn 2 the human's first (c<i>_0)."""
    records = []
    for i in range(N_ITEMS):
        pool = [f"c{i}_{j}" for j in range(4)]
        first = {pool[2]: 3.0, pool[0]: 2.0, pool[1]: 1.0, pool[3]: 0.0}
        second = {pool[0]: 3.0, pool[1]: 2.0, pool[2]: 1.0, pool[3]: 0.0}
        records.append(Record(item_id=f"d{i}", candidates=pool, scores=first, extra={"turn": 1}))
        extra = {"turn": 2, "first_pick": pool[2], "feedback": REPLY, "feedback_source": "aspects"}
        records.append(Record(item_id=f"d{i}", candidates=pool, scores=second, extra=extra))
    return records


def describe_records() -> list[Record]:
    return [
        Record(
            item_id=f"d{i}",
            candidates=[f"c{i}_{j}" for j in range(4)],
            raw="{}",
            scores={f"c{i}_{j}": float(-j) for j in range(4)},
            extra={"description": f"A soft tone number {i}.", "reference_cosine": 0.5},
        )
        for i in range(N_ITEMS)
    ]


@pytest.fixture
def report(tmp_path: Path) -> Path:
    dataset = write_tiny_dataset(tmp_path / "data", n_items=N_ITEMS)
    sweep = tmp_path / "results"
    write_run(sweep / "refined", dataset, refine_records(), protocol="refine")
    # written before `protocol:` selected describe: read as protocol: describe
    write_run(sweep / "described", dataset, describe_records(), prompt="describe")
    runs = load_runs([sweep / "refined", sweep / "described"])
    write_report(analyse(runs), tmp_path / "report", title="protocols")
    return tmp_path / "report"


def test_comparison_has_the_turns_and_the_descriptions(report: Path) -> None:
    text = (report / "comparison.md").read_text()
    turns = text[text.index("## Turns") :]
    hits = " | Hit@1 | 0.000 [0.000, 0.000] | 1.000 [1.000, 1.000] | 1.000 [1.000, 1.000] |"
    assert re.search(r"^\| refined[^|]*" + re.escape(hits), turns, re.M)
    assert re.search(r"^\| refined[^|]* \| SR@1 \| 1\.000 \[1\.000, 1\.000\] \|", turns, re.M)
    assert "described" not in turns.split("## Descriptions")[0]
    descriptions = text[text.index("## Descriptions") :]
    assert re.search(r"^\| described[^|]* \|", descriptions, re.M) and "BLEU-4" in descriptions


def test_the_browser_data_has_picks_replies_and_descriptions(report: Path) -> None:
    html = (report / "report.html").read_text()
    assert "<b>tone</b>" not in html  # the reply travels escaped
    items = {item["id"]: item for item in report_data(html)["items"]}
    refined, _ = items["d0"]["protocols"]
    assert refined["run"].startswith("refined") and refined["feedback"] == REPLY
    assert [(t["turn"], t["pick"], t["gold_rank"]) for t in refined["turns"]] == [
        (1, "c0_2", 2.0),
        (2, "c0_0", 1.0),
    ]
    captions = {c["id"]: c["caption"] for c in items["d1"]["candidates"]}
    (_, description) = items["d1"]["protocols"]
    assert description["description"] == "A soft tone number 1."
    assert description["references"] == [captions["c1_0"]] and description["cosine"] == 0.5


def test_the_browser_shows_them_in_chromium(report: Path, page: Any) -> None:
    page.goto((report / "report.html").as_uri())
    block = page.locator("#item-d0 .protocol").first
    assert "turn 1: pick c0_2" in block.inner_text() and "gold at rank 2.0" in block.inner_text()
    assert REPLY in block.locator(".feedback").inner_text()
    table = page.locator("#item-d0 table.description").inner_text()
    assert "A soft tone number 0." in table and "human top clip's caption" in table
