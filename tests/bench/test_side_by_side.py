"""`python -m bench --against TREE`: both checkouts run the benchmark with their own code, and
the side-by-side section replaces its earlier self without touching the rest of the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import side_by_side
from bench.common import REPO


def test_the_section_is_replaced_and_the_rest_kept(tmp_path: Path) -> None:
    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark results\n\n## throughput\n\nkept\n")
    side_by_side.write_section(results, ["- date: one"], tmp_path, ["| a | b |"])
    side_by_side.write_section(results, ["- date: two"], tmp_path, ["| c | d |"])
    text = results.read_text()
    assert text.count(side_by_side.BEGIN) == 1 and "kept" in text
    assert "- date: two" in text and "| c | d |" in text and "| a | b |" not in text


@pytest.mark.slow
def test_a_benchmark_runs_in_both_checkouts_side_by_side() -> None:
    rows = side_by_side.compare(["metrics"], REPO, "tiny")
    assert rows[0].startswith("| benchmark | figure |")
    quotients = [row.rsplit("|", 2)[1].strip() for row in rows[2:]]
    assert rows[2:] and any(q for q in quotients)  # the same code on both sides: ratios exist


def test_a_failing_side_is_named(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="exited"):
        side_by_side.figures_in(REPO, "no_such_benchmark", "tiny")
