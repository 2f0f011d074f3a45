"""The sequential comparison's decisions, on per-item values given directly."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import pytest

from harness.core.errors import HarnessError
from harness.runs.compare.engine import decide, sequential_compare
from harness.runs.compare.sources import ValuesSource, metric_spec


@pytest.mark.parametrize(
    ("low", "high", "margin", "decision"),
    [
        (0.01, 0.2, None, "B better"),
        (-0.3, -0.02, 0.5, "A better"),
        (-0.02, 0.03, 0.05, "equivalent"),
        (-0.02, 0.06, 0.05, None),
        (-0.02, 0.03, None, None),
    ],
)
def test_decide(low: float, high: float, margin: float | None, decision: str | None) -> None:
    assert decide(low, high, margin) == decision


def _values(rate: float, seed: int, n: int = 1000) -> dict[str, float]:
    hits = np.random.default_rng(seed).random(n) < rate
    return {f"i{i}": float(h) for i, h in enumerate(hits)}


def test_a_better_and_the_order_follows_the_seed() -> None:
    source = ValuesSource(_values(0.6, 1), _values(0.2, 2))
    first = sequential_compare(source, seed=3, batch_size=25)
    again = sequential_compare(source, seed=3, batch_size=25)
    other = sequential_compare(source, seed=4, batch_size=25)
    assert first.decision == again.decision == other.decision == "A better"
    assert first.items == again.items != other.items
    assert first.cs[1] < 0 and first.n_items < 1000
    assert all(a.lo <= b.lo and b.hi <= a.hi for a, b in itertools.pairwise(first.path))


def test_items_scored_on_one_side_only_are_skipped() -> None:
    a, b = _values(0.5, 1, 100), _values(0.5, 2, 100)
    del b["i3"]
    result = sequential_compare(ValuesSource(a, b), batch_size=10)
    assert "i3" not in result.items and result.n_items_total == 99


def test_finite_refuses_items_without_a_value() -> None:
    class Partial(ValuesSource):
        def values(self, asked: Sequence[str]) -> tuple[dict[str, float], dict[str, float]]:
            a, b = super().values(asked)
            b.pop("i0", None)  # as `missing: exclude` drops an item after the run
            return a, b

    source = Partial(_values(0.5, 1, 100), _values(0.5, 2, 100))
    assert sequential_compare(source, batch_size=100).n_items == 100
    with pytest.raises(HarnessError, match="--finite needs a value on both sides"):
        sequential_compare(source, batch_size=100, finite=True)


def test_metric_spec() -> None:
    assert metric_spec("kendall_tau_b") == ((), 2.0)
    assert metric_spec("ndcg@10") == ((10,), 1.0)
    with pytest.raises(HarnessError, match="not a bounded per-item metric"):
        metric_spec("mean_rank")
