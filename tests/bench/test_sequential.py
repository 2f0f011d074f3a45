"""The sequential comparison's simulation (bench/sequential.py): a few seeds in the default
run; docs/sequential.md's figures from the committed per-seed outcomes, and seeds of those
recomputed, as slow."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.sequential import (
    EFFECT,
    POWER_EFFECTS,
    POWER_FILE,
    SEEDS_FILE,
    docs_rows,
    one_comparison,
    power_row,
    seed_outcomes,
    summarise,
    synthetic_items,
    synthetic_records,
)
from harness.runs.compare.sources import per_item_metric
from tests.support.doc_blocks import stale

DOCS = Path(__file__).resolve().parents[2] / "docs" / "sequential.md"


def test_synthetic_hit_rates_are_as_designed() -> None:
    import numpy as np

    items = synthetic_items(2000)
    values = per_item_metric(
        items, synthetic_records(items, 0.45, np.random.default_rng(1)), "hit@1", repeats=1
    )
    assert set(values.values()) <= {0.0, 1.0}
    assert abs(sum(values.values()) / 2000 - 0.45) < 0.035


def test_a_few_seeds_decide_b_better_early_and_equal_runs_rarely_decide() -> None:
    items = synthetic_items()
    better = [one_comparison(seed, EFFECT, items=items) for seed in range(3)]
    assert all(r.decision == "B better" for r in better)
    assert sorted(r.n_items for r in better)[1] <= 0.3 * 2000  # the median
    # the terminal line docs/sequential.md shows is seed 0's
    assert better[0].line() in DOCS.read_text()
    equal = [one_comparison(seed, 0.0, items=items) for seed in range(1)]
    assert all(r.decision == "undecided" and r.n_items == 2000 for r in equal)


def _committed_seeds() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads(SEEDS_FILE.read_text())
    return rows


def test_the_docs_figures_are_the_committed_100_seeds() -> None:
    better, equal = (summarise(row) for row in _committed_seeds())
    page = DOCS.read_text()
    for row in docs_rows(better, equal):
        assert row in page, row
    assert better.seeds == equal.seeds == 100
    assert better.b_better >= 0.95 and better.median_fraction <= 0.30 and equal.decided <= 0.05


@pytest.mark.slow
def test_the_committed_seeds_are_what_the_simulation_gives() -> None:
    """The first 20 of each effect's 100 seeds recomputed (`python -m bench.sequential
    --seeds` recomputes all of them)."""
    for row in _committed_seeds():
        fresh = seed_outcomes(20, row["effect"])
        assert fresh == _first_seeds(row, 20)


def _committed() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads(POWER_FILE.read_text())
    return rows


def _first_seeds(row: dict[str, Any], n: int) -> dict[str, Any]:
    return {
        key: value[:n] if isinstance(value, str | list) else value for key, value in row.items()
    }


def test_the_power_table_in_the_docs_is_the_committed_bench_output() -> None:
    """Failing first (issue 49): docs/sequential.md had no figure of the power given up at
    small effects; now its table is rendered from bench/sequential_power.json."""
    assert stale({"sequential-power"}) == []
    rows = _committed()
    assert [(r["effect"], r["finite"]) for r in rows] == [
        *((e, False) for e in POWER_EFFECTS),
        (0.0, True),
    ]
    assert "sequential-power" in DOCS.read_text()


@pytest.mark.parametrize(
    "seeds",
    [pytest.param(1, id="seed 0"), pytest.param(20, marks=pytest.mark.slow, id="seeds 0-19")],
)
def test_the_committed_power_output_is_what_the_bench_computes(seeds: int) -> None:
    for row in _committed():
        fresh = power_row(row["effect"], range(seeds), finite=row["finite"])
        assert fresh == _first_seeds(row, seeds)
