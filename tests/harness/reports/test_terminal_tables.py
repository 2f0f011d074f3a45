"""The terminal results table at any width (issue 47, #1): rich squeezed the run-name column
to nothing once the metric columns filled the line (logs, `| tee`, narrow terminals); the
table now splits its metric columns over as many tables as the width needs, each with the
run names, and cuts no cell."""

from __future__ import annotations

import io
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from harness.reports.formatting import rich_table

NAMES = ["hit@1", "mrr", "ndcg", "kendall_tau_b", "hit@10", "recall@10", "ndcg@10"]
NAMES += ["median_rank", "success@10"]
RUNS = [
    "text-embedding_all-MiniLM-L6-v2_query_caption",
    "random_uniform_query_caption",
    "gemini_gemini-2.5-flash_query_caption",
]


def metrics_block() -> dict[str, Any]:
    summary = {"mean": 0.5, "ci95": [0.123, 0.987]}
    return {
        "metrics": {name: summary for name in NAMES},
        "n_items": 200,
        "coverage": 1.0,
        "tie_rate": 0.0,
    }


def printed(width: int) -> str:
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=False)
    console.print(rich_table("refine", [(run, metrics_block()) for run in RUNS]))
    return out.getvalue()


def run_column(text: str) -> str:
    """The first column's text of every table, read top to bottom and joined."""
    return "".join(line.split("│")[1].strip() for line in text.splitlines() if "│" in line)


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=40, max_value=240))
def test_every_run_name_and_figure_is_whole_at_any_width(width: int) -> None:
    text = printed(width)
    assert all(len(line) <= width for line in text.splitlines())
    assert "…" not in text  # no header or figure cut
    column = run_column(text)
    tables = text.count("┏")
    assert column.count("".join(RUNS)) == tables  # each table names every run, in full
    for label in ("Hit@1", "tau-b", "R@10", "nDCG@10", "median rank", "SR@10", "tie rate"):
        assert text.count(f" {label} ") == 1  # each column once, in one of the tables


def test_a_log_line_keeps_the_run_names_unfolded() -> None:
    text = printed(160)  # what harness.core.console.terminal() gives a file or a pipe
    for run in RUNS:
        assert f"│ {run} " in text
