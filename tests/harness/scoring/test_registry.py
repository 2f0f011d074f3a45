"""The metric table (`harness.scoring.registry`): the order and columns it gives are those
metrics.json and the tables have always had, and a metric added by one entry is computed,
aggregated, labelled, shown and comparable with no other change."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from harness.core.dataset import Item
from harness.runs.compare.sources import metric_spec
from harness.scoring import registry
from harness.scoring.evaluation import evaluate_predictions
from harness.scoring.metrics import metric_names
from harness.scoring.ranking import RankedBlock
from harness.scoring.sorted_block import FloatArray


@pytest.fixture
def table(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The metric table, restored after the test."""
    monkeypatch.setattr(registry, "METRICS", dict(registry.METRICS))
    yield


def test_the_names_come_in_the_order_metrics_json_has_them() -> None:
    assert metric_names((5, 1, 5), single_gold=True) == (
        *("hit@1", "mrr", "ndcg", "kendall_tau_b", "hit@5"),
        *("recall@1", "recall@5", "precision@1", "precision@5", "ndcg@1", "ndcg@5"),
        *("median_rank", "mean_rank"),
    )


def test_the_tables_show_the_columns_they_always_showed() -> None:
    present = {*metric_names((1, 5, 10), single_gold=True), "success@1", "success@5", "success@10"}
    core = ["hit@1", "mrr", "ndcg", "kendall_tau_b"]
    ranks = ["median_rank", "mean_rank"]
    assert registry.shown(present) == [
        *core,
        *("recall@1", "recall@5", "recall@10", "ndcg@1", "ndcg@5", "ndcg@10"),
        *ranks,
        *("success@1", "success@5", "success@10"),
    ]
    assert registry.shown(present, compact=True) == [
        *core,
        *("recall@10", "ndcg@10", *ranks, "success@10"),
    ]
    assert registry.shown({"hit@1", "success@1"}) == [*core, "success@1"]
    labels = [registry.label(n) for n in ("kendall_tau_b", "recall@20", "success@5", "bleu_4")]
    assert labels == ["tau-b", "R@20", "SR@5", "BLEU-4"]
    assert registry.label("not_a_metric") == "not a metric"


def test_compare_takes_the_bounded_per_item_metrics() -> None:
    assert registry.comparable("kendall_tau_b") == ((), 2.0)
    assert registry.comparable("precision@3") == ((3,), 1.0)
    for name in ("mean_rank", "success@1", "bleu_1", "recall@K", "nope"):
        assert registry.comparable(name) is None, name


ITEMS = [Item(id=f"d{i}", query="q", candidates=("a", "b", "c"), relevant=("b",)) for i in range(4)]
SCORES = {0: {f"d{i}": {"a": float(i % 2), "b": 0.5, "c": 0.0} for i in range(4)}}


@pytest.mark.usefixtures("table")
def test_a_metric_added_by_one_entry_is_reported_everywhere_the_table_is_read() -> None:
    @registry.register_metric("top_gain", "top gain")
    def top_gain(block: RankedBlock, k: int) -> FloatArray:
        """Whether the candidate sorted first (the first of a tie) is relevant."""
        relevant: FloatArray = (block.sorted.gains[:, 0] > 0).astype(float)
        return relevant

    @registry.register_metric("gain_in@K", "G@K", kind="retrieval")
    def gain_in(block: RankedBlock, k: int) -> FloatArray:
        """Relevant candidates among the first k sorted."""
        count: FloatArray = (block.sorted.gains[:, :k] > 0).sum(axis=1).astype(float)
        return count

    metrics = evaluate_predictions(ITEMS, SCORES, at=(2,), n_bootstrap=20).to_json()["metrics"]
    names = list(metrics)
    assert names.index("top_gain") == names.index("kendall_tau_b") + 1
    assert names.index("gain_in@2") == names.index("ndcg@2") + 1
    # d0, d2: b (0.5) first; d1, d3: a (1.0) first, then b
    assert metrics["top_gain"]["mean"] == 0.5 and metrics["gain_in@2"]["mean"] == 1.0
    assert "top_gain" in registry.shown(metrics) and "gain_in@2" in registry.shown(metrics)
    assert registry.label("gain_in@2") == "G@2" and metric_spec("top_gain") == ((), 1.0)


@pytest.mark.usefixtures("table")
def test_a_lower_is_better_median_metric_is_aggregated_by_its_median() -> None:
    registry.register_metric(
        "first_place", "first place", bound=None, higher_is_better=False, statistic="median"
    )(lambda block, k: np.where(block.sorted.gains[:, 0] > 0, 1.0, 2.0))
    metrics = evaluate_predictions(ITEMS, SCORES, n_bootstrap=20).aggregate.metrics
    assert metrics["first_place"].mean == 1.5  # median of 1, 2, 1, 2
    with pytest.raises(Exception, match="not a bounded per-item metric"):
        metric_spec("first_place")


@pytest.mark.usefixtures("table")
def test_a_kind_of_a_plugins_own_sorts_after_the_built_in_ones() -> None:
    registry.register_metric("agreement_alpha", "alpha", kind="reliability")(None)  # type: ignore[arg-type]
    assert registry.metrics()[-1].name == "agreement_alpha"
    assert registry.shown({"agreement_alpha"})[-1] == "agreement_alpha"  # a column where present
