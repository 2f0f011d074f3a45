"""Joint prompts: presentation order, position bias from the records, and a full joint run."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.calls.cache import ResponseCache
from harness.calls.prompting.joint import clip_labels, presentation_order
from harness.config.experiment import ExperimentConfig, provider_config
from harness.core.dataset import Item, load_dataset
from harness.core.records import Record, read_records
from harness.runs.runner import Runner
from harness.scoring.stats import position_top1_rates


def test_labels_and_orders() -> None:
    assert clip_labels(4) == ["Clip 1", "Clip 2", "Clip 3", "Clip 4"]
    assert clip_labels(1) == ["Clip"]
    cands = ["a", "b", "c", "d"]
    assert presentation_order(cands, "fixed", seed=0, item_id="x", repeat=3) == cands
    first = presentation_order(cands, "permuted", seed=0, item_id="x", repeat=0)
    assert first == presentation_order(cands, "permuted", seed=0, item_id="x", repeat=0)
    seen = {
        tuple(presentation_order(cands, "permuted", seed=s, item_id="x", repeat=r))
        for s in range(3)
        for r in range(10)
    }
    assert len(seen) > 10 and all(sorted(order) == cands for order in seen)


def test_squares_repeat_the_orders_of_the_first_squares() -> None:
    """`squares: 1`: 12 repeats of 4 candidates show each of one square's 4 orders 3 times
    (how stable a sampling judge is at one order); `squares: 2` goes round two squares."""
    cands = ["a", "b", "c", "d"]

    def orders(squares: int | None) -> list[tuple[str, ...]]:
        return [
            tuple(
                presentation_order(
                    cands, "permuted", seed=0, item_id="x", repeat=r, squares=squares
                )
            )
            for r in range(12)
        ]

    fresh, one, two = orders(None), orders(1), orders(2)
    assert one[:4] == fresh[:4] and one == one[:4] * 3
    assert two[:8] == fresh[:8] and two[8:] == fresh[:4]
    assert len(set(fresh)) == 12


def positions_per_candidate(orders: list[list[str]]) -> dict[str, list[int]]:
    return {c: sorted(order.index(c) for order in orders) for c in orders[0]}


def test_permuted_with_n_repeats_is_counterbalanced_on_every_sample_item() -> None:
    dataset = load_dataset("data/sample", check_audio=False)
    for item in dataset.items:
        n = len(item.candidates)
        orders = [
            presentation_order(item.candidates, "permuted", seed=0, item_id=item.id, repeat=r)
            for r in range(n)
        ]
        assert positions_per_candidate(orders) == {c: list(range(n)) for c in item.candidates}
        assert len({tuple(o) for o in orders}) == n  # no repeated order, so no cache hit


@given(
    n=st.integers(min_value=2, max_value=6),
    repeats=st.integers(min_value=1, max_value=18),
    seed=st.integers(min_value=0, max_value=3),
)
def test_each_block_of_n_repeats_is_a_latin_square(n: int, repeats: int, seed: int) -> None:
    cands = [f"c{i}" for i in range(n)]
    orders = [
        presentation_order(cands, "permuted", seed=seed, item_id="x", repeat=r)
        for r in range(repeats)
    ]
    for start in range(0, repeats, n):
        block = orders[start : start + n]
        for position in range(n):
            shown = [order[position] for order in block]
            assert len(set(shown)) == len(shown)  # nobody twice in one position
        if len(block) == n:
            assert positions_per_candidate(block) == {c: list(range(n)) for c in cands}
    distinct_orders = math.factorial(n)
    assert len({tuple(o) for o in orders}) == min(repeats, distinct_orders)


def item(item_id: str, best: str) -> Item:
    cands = ("a", "b", "c", "d")
    rest = tuple(c for c in cands if c != best)
    return Item(
        id=item_id,
        dialogue=({"speaker": "A", "text": "hi"},),  # type: ignore[arg-type]
        candidates=cands,
        human_ranking=(best, *rest),
    )


def test_position_top1_rates_count_ties_and_skip_unusable_records() -> None:
    items = [item("i1", "a"), item("i2", "c")]
    records = [
        Record(
            item_id="i1", candidates=["a", "b", "c", "d"], scores={"a": 9, "b": 1, "c": 1, "d": 1}
        ),
        Record(
            item_id="i2",
            candidates=["c", "a", "b", "d"],
            scores={"c": 2, "a": 8, "b": 8, "d": None},
        ),
        Record(item_id="i2", candidates=["d", "c", "b", "a"], scores=dict.fromkeys("dcba")),
        Record(item_id="i1", candidates=["a"], scores={"a": 5.0}),  # pointwise: not counted
    ]
    rates = position_top1_rates(records, items)
    assert rates["calls"] == 2
    assert rates["model"] == [0.5, 0.25, 0.25, 0.0]
    assert rates["human"] == [1.0, 0.0, 0.0, 0.0]  # the human best sat first both times
    assert position_top1_rates([], items) == {"calls": 0, "model": [], "human": []}


@pytest.mark.parametrize("answer", ["scores", "ranking"])
def test_joint_run_with_permuted_order_measures_position_bias(
    tiny_dataset: Path, tmp_path: Path, answer: str
) -> None:
    # A judge that always prefers whatever is presented first.
    reply = (
        {"ranking": ["Clip 1", "Clip 2", "Clip 3", "Clip 4"]}
        if answer == "ranking"
        else {"scores": {"Clip 1": 9, "Clip 2": 5, "Clip 3": 3, "Clip 4": 1}}
    )
    config = ExperimentConfig(
        name="j",
        dataset=tiny_dataset,
        provider=provider_config(name="mock", answers={"*": json.dumps(reply)}),
        prompt="joint",
        prompt_options={"order": "permuted", "answer": answer},
        repeats=4,
        n_bootstrap=20,
    )
    cache = ResponseCache(tmp_path / "cache")
    try:
        runner = Runner(config, cache=cache, results_dir=tmp_path / "r", show_progress=False)
        result = asyncio.run(runner.run())
    finally:
        cache.close()
    assert result.complete and result.stats.calls == 12  # 3 items x 4 repeats, one call each
    records = list(read_records(result.out_dir / "records.jsonl"))
    assert all(r.parse_error is None for r in records)
    for record in records:  # the record keeps the order the clips were presented in
        assert record.candidates == presentation_order(
            sorted(record.candidates, key=lambda c: -int(c[-1])),
            "permuted",
            seed=0,
            item_id=record.item_id,
            repeat=record.repeat,
        )
        assert max(record.scores, key=lambda c: record.scores[c] or 0) == record.candidates[0]
    assert len({tuple(r.candidates) for r in records}) > 3
    metrics = json.loads((result.out_dir / "metrics.json").read_text())
    bias = metrics["position_top1"]
    assert bias["calls"] == 12 and bias["model"] == [1.0, 0.0, 0.0, 0.0]
    assert sum(bias["human"]) == pytest.approx(1.0)
    assert metrics["n_repeats"] == 4 and len(metrics["metrics"]["hit@1"]["repeats"]) == 4
