"""Metric layer: hand-worked tie cases, and properties against references (sklearn,
scipy, brute-force enumeration of every tie-break)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import kendalltau
from sklearn.metrics import ndcg_score

from harness.core.dataset import Item, Turn
from harness.core.errors import HarnessError
from harness.scoring import metrics as metrics_module
from harness.scoring.metrics import ScoreMatrix, aggregate, build_matrix, per_item_metrics

REL4 = np.array([[3.0, 2.0, 1.0, 0.0]])  # candidate 0 is the human first


def metrics_of(scores: list[float], relevance: np.ndarray = REL4) -> dict[str, float]:
    values = per_item_metrics(np.array([scores], dtype=float), relevance)
    return {name: float(v[0]) for name, v in values.items()}


# ---------------------------------------------------------------- hand-worked cases
def test_perfect_ranking() -> None:
    m = metrics_of([9, 7, 5, 1])
    assert m == {"hit@1": 1.0, "mrr": 1.0, "ndcg": 1.0, "kendall_tau_b": 1.0}


def test_reversed_ranking() -> None:
    m = metrics_of([1, 5, 7, 9])
    assert m["hit@1"] == 0.0
    assert m["mrr"] == pytest.approx(0.25)
    assert m["kendall_tau_b"] == pytest.approx(-1.0)
    ideal = 3 + 2 / math.log2(3) + 1 / math.log2(4)
    dcg = 0 + 1 / math.log2(3) + 2 / math.log2(4) + 3 / math.log2(5)
    assert m["ndcg"] == pytest.approx(dcg / ideal)


def test_human_first_tied_at_top_with_one_other() -> None:
    m = metrics_of([8, 8, 5, 1])
    assert m["hit@1"] == pytest.approx(0.5)
    assert m["mrr"] == pytest.approx((1 + 1 / 2) / 2)
    # Positions 1-2 share the mean gain (3+2)/2.
    dcg = 2.5 * (1 + 1 / math.log2(3)) + 1 / math.log2(4)
    ideal = 3 + 2 / math.log2(3) + 1 / math.log2(4)
    assert m["ndcg"] == pytest.approx(dcg / ideal)
    # 6 pairs, 5 concordant, 1 tied in scores only: 5 / sqrt(5 * 6).
    assert m["kendall_tau_b"] == pytest.approx(5 / math.sqrt(30))


def test_top_tie_without_the_human_first() -> None:
    m = metrics_of([5, 8, 8, 1])
    assert m["hit@1"] == 0.0
    assert m["mrr"] == pytest.approx(1 / 3)


def test_human_first_tied_in_the_middle() -> None:
    m = metrics_of([5, 9, 5, 5])
    assert m["hit@1"] == 0.0
    assert m["mrr"] == pytest.approx((1 / 2 + 1 / 3 + 1 / 4) / 3)


def test_all_scores_equal() -> None:
    m = metrics_of([4, 4, 4, 4])
    assert m["hit@1"] == pytest.approx(0.25)
    assert m["mrr"] == pytest.approx((1 + 1 / 2 + 1 / 3 + 1 / 4) / 4)
    assert m["kendall_tau_b"] == 0.0  # not NaN
    ideal = 3 + 2 / math.log2(3) + 1 / math.log2(4)
    mean_gain, total_discount = 1.5, sum(1 / math.log2(r + 1) for r in range(1, 5))
    assert m["ndcg"] == pytest.approx(mean_gain * total_discount / ideal)


def test_two_candidates() -> None:
    m = metrics_of([1.0, 2.0], np.array([[1.0, 0.0]]))
    assert m == {
        "hit@1": 0.0,
        "mrr": 0.5,
        "ndcg": pytest.approx(1 / math.log2(3)),
        "kendall_tau_b": -1.0,
    }


def _item(item_id: str, candidates: list[str], ranking: list[str]) -> Item:
    return Item(
        id=item_id,
        dialogue=(Turn(speaker="A", text="hi"),),
        candidates=tuple(candidates),
        human_ranking=tuple(ranking),
    )


ITEMS = [
    _item("a", ["x", "y", "z", "w"], ["x", "y", "z", "w"]),
    _item("b", ["p", "q", "r", "s"], ["s", "r", "q", "p"]),
]


def test_missing_worst_places_missing_below_scored_and_tied() -> None:
    # Item a: human first x missing; it ties with w (missing) below y and z.
    preds = {
        "a": {"x": None, "y": 5.0, "z": 3.0, "w": None},
        "b": {"p": 1.0, "q": 2.0, "r": 3.0, "s": 4.0},
    }
    result = aggregate([build_matrix(ITEMS, preds)], missing="worst", n_bootstrap=50)
    assert result.n_items == 2
    assert result.coverage == pytest.approx(6 / 8)
    assert result.per_item["mrr"][0] == pytest.approx((1 / 3 + 1 / 4) / 2)
    assert result.per_item["hit@1"][1] == 1.0


def test_missing_exclude_drops_the_item() -> None:
    preds = {
        "a": {"x": None, "y": 5.0, "z": 3.0, "w": 1.0},
        "b": {"p": 1.0, "q": 2.0, "r": 3.0, "s": 4.0},
    }
    result = aggregate([build_matrix(ITEMS, preds)], missing="exclude", n_bootstrap=50)
    assert result.n_items == 1
    assert result.item_ids == ["b"]
    assert result.coverage == pytest.approx(7 / 8)
    assert result.metrics["hit@1"].mean == 1.0


def test_item_without_prediction_counts_as_missing() -> None:
    result = aggregate(
        [build_matrix(ITEMS, {"b": {"p": 1.0, "q": 2.0, "r": 3.0, "s": 4.0}})], n_bootstrap=50
    )
    assert result.coverage == pytest.approx(0.5)
    assert result.per_item["hit@1"][0] == pytest.approx(0.25)  # all tied at "worst"
    assert result.tie_rate == pytest.approx(0.5)


def test_everything_excluded_gives_no_numbers_not_a_crash() -> None:
    result = aggregate([build_matrix(ITEMS, {})], missing="exclude", n_bootstrap=50)
    assert result.n_items == 0
    assert result.metrics["mrr"].mean is None
    assert result.to_json()["metrics"]["mrr"] == {"mean": None, "ci95": None}


def test_bootstrap_is_seeded_and_brackets_the_mean() -> None:
    rng = np.random.default_rng(1)
    items = [_item(f"i{k}", ["a", "b", "c", "d"], ["a", "b", "c", "d"]) for k in range(60)]
    preds = {it.id: dict(zip("abcd", rng.uniform(0, 10, 4).round(1), strict=True)) for it in items}
    matrix = build_matrix(items, preds)
    first = aggregate([matrix], seed=7).to_json()
    assert first == aggregate([matrix], seed=7).to_json()
    assert first != aggregate([matrix], seed=8).to_json()
    for summary in first["metrics"].values():  # type: ignore[union-attr]
        low, high = summary["ci95"]
        assert low <= summary["mean"] <= high
        assert low < high


def test_repeats_report_mean_std_and_per_repeat_means() -> None:
    good = {
        "a": {"x": 4.0, "y": 3.0, "z": 2.0, "w": 1.0},
        "b": {"p": 1.0, "q": 2.0, "r": 3.0, "s": 4.0},
    }
    bad = {
        "a": {"x": 1.0, "y": 3.0, "z": 2.0, "w": 4.0},
        "b": {"p": 4.0, "q": 2.0, "r": 3.0, "s": 1.0},
    }
    result = aggregate([build_matrix(ITEMS, good), build_matrix(ITEMS, bad)], n_bootstrap=50)
    hit = result.metrics["hit@1"]
    assert hit.repeats == [1.0, 0.0]
    assert hit.mean == 0.5
    assert hit.std == pytest.approx(math.sqrt(0.5))
    assert result.to_json()["n_repeats"] == 2


def test_mixed_candidate_counts() -> None:
    items = [ITEMS[0], _item("c", ["u", "v"], ["v", "u"])]
    preds = {"a": {"x": 4.0, "y": 3.0, "z": 2.0, "w": 1.0}, "c": {"u": 1.0, "v": 2.0}}
    result = aggregate([build_matrix(items, preds)], n_bootstrap=50)
    assert list(result.per_item["ndcg"]) == [1.0, 1.0]
    assert result.n_candidates == 4


# ---------------------------------------------------------------- properties
def brute_force(scores: list[float], relevance: list[float]) -> dict[str, float]:
    """Average of each metric over every strict order consistent with the scores."""
    n = len(scores)
    best = int(np.argmax(relevance))
    ideal = sum(r / math.log2(i + 2) for i, r in enumerate(sorted(relevance, reverse=True)))
    totals = {"hit@1": 0.0, "mrr": 0.0, "ndcg": 0.0}
    count = 0
    for order in itertools.permutations(range(n)):
        if any(scores[order[i]] < scores[order[i + 1]] for i in range(n - 1)):
            continue
        count += 1
        rank = order.index(best) + 1
        totals["hit@1"] += rank == 1
        totals["mrr"] += 1 / rank
        totals["ndcg"] += sum(relevance[c] / math.log2(i + 2) for i, c in enumerate(order)) / ideal
    return {k: v / count for k, v in totals.items()}


score_lists = st.integers(min_value=2, max_value=6).flatmap(
    lambda n: st.tuples(
        st.lists(st.sampled_from([0.0, 2.5, 5.0, 7.5, 10.0]), min_size=n, max_size=n),
        st.permutations(list(range(n))),
    )
)


@settings(max_examples=300, deadline=None)
@given(score_lists)
def test_matches_brute_force_tie_breaking(case: tuple[list[float], list[int]]) -> None:
    scores, permutation = case
    relevance = [float(r) for r in permutation]
    ours = metrics_of(scores, np.array([relevance]))
    expected = brute_force(scores, relevance)
    for name, value in expected.items():
        assert ours[name] == pytest.approx(value, abs=1e-9), name


@settings(max_examples=300, deadline=None)
@given(score_lists)
def test_ndcg_matches_sklearn_with_ties(case: tuple[list[float], list[int]]) -> None:
    scores, permutation = case
    relevance = [float(r) for r in permutation]
    ours = metrics_of(scores, np.array([relevance]))["ndcg"]
    assert ours == pytest.approx(ndcg_score([relevance], [scores], ignore_ties=False), abs=1e-9)


@settings(max_examples=300, deadline=None)
@given(score_lists)
def test_tau_b_matches_scipy(case: tuple[list[float], list[int]]) -> None:
    scores, permutation = case
    relevance = [float(r) for r in permutation]
    ours = metrics_of(scores, np.array([relevance]))["kendall_tau_b"]
    reference = kendalltau(scores, relevance, variant="b").statistic
    assert ours == pytest.approx(0.0 if np.isnan(reference) else reference, abs=1e-9)


@settings(max_examples=200, deadline=None)
@given(score_lists, st.data())
def test_missing_worst_equals_scoring_missing_below_everything(
    case: tuple[list[float], list[int]], data: st.DataObject
) -> None:
    scores, permutation = case
    mask = data.draw(st.lists(st.booleans(), min_size=len(scores), max_size=len(scores)))
    with_nan = [np.nan if m else s for s, m in zip(scores, mask, strict=True)]
    lowered = [-1.0 if m else s for s, m in zip(scores, mask, strict=True)]
    relevance = np.array([[float(r) for r in permutation]])
    matrix = ScoreMatrix(["i"], [np.array(with_nan)], [relevance[0]])
    result = aggregate([matrix], n_bootstrap=10)
    expected = metrics_of(lowered, relevance)
    for name, value in expected.items():
        assert result.per_item[name][0] == pytest.approx(value, abs=1e-9)


# ---------------------------------------------------------------- several gold, graded, cut-offs
def one_item(scores: list[float], gains: list[float], at: tuple[int, ...]) -> dict[str, float]:
    values = per_item_metrics(np.array([scores], dtype=float), np.array([gains]), at=at)
    return {name: float(v[0]) for name, v in values.items()}


def test_two_gold_in_a_four_way_tie_at_the_top() -> None:
    m = one_item([5, 5, 5, 5, 1], [1, 1, 0, 0, 0], at=(1, 2, 3))
    # Hit@K = 1 - C(g-c, m)/C(g, m), g=4 tied, c=2 gold, m=K places of the tie in the top K.
    assert m["hit@1"] == pytest.approx(1 - 2 / 4)
    assert m["hit@2"] == pytest.approx(1 - 1 / 6)
    assert m["hit@3"] == 1.0
    # First gold at offset 0, 1, 2 with probability 2/4, (2/4)(2/3), (2/4)(1/3): 1/2+1/6+1/18.
    assert m["mrr"] == pytest.approx(13 / 18)
    # Each tied candidate lies in the top 2 with probability 2/4: expected gold found 2 * 1/2.
    assert m["recall@2"] == pytest.approx(0.5)
    assert m["precision@2"] == pytest.approx(0.5)
    assert m["recall@3"] == pytest.approx(2 * 3 / 4 / 2)
    assert m["precision@3"] == pytest.approx(2 * 3 / 4 / 3)
    # Mean gain of the tie is 2/4 at places 1 and 2; the ideal puts both gold there.
    assert m["ndcg@2"] == pytest.approx(0.5)
    # 10 pairs; 6 tied in score (untied 4), 1+3 tied in gain (untied 6); 2 concordant.
    assert m["kendall_tau_b"] == pytest.approx(2 / math.sqrt(4 * 6))


def test_graded_relevance_with_a_tie_across_the_cutoff() -> None:
    # Sorted: c0 (gain 0), then c1 (3) and c2 (1) tied at places 2-3 (mean gain 2), c3 (2).
    m = one_item([9, 4, 4, 1], [0, 3, 1, 2], at=(1, 2, 3))
    ideal = [3, 3 + 2 / math.log2(3), 3 + 2 / math.log2(3) + 1 / 2]
    assert m["ndcg@1"] == 0.0
    assert m["ndcg@2"] == pytest.approx((2 / math.log2(3)) / ideal[1])
    assert m["ndcg@3"] == pytest.approx((2 / math.log2(3) + 2 / 2) / ideal[2])
    assert m["hit@2"] == pytest.approx(1 / 2)  # the most relevant c1 takes place 2 half the time
    assert m["mrr"] == pytest.approx((1 / 2 + 1 / 3) / 2)
    # Relevant (gain > 0): c1, c2, c3. In the top 2: c1 or c2, one of them: 1 of 3.
    assert m["recall@2"] == pytest.approx(1 / 3)
    assert m["precision@2"] == pytest.approx(1 / 2)


def test_cutoff_beyond_the_candidates() -> None:
    m = one_item([1, 4, 3, 2], [1, 0, 1, 0], at=(10,))
    assert m["hit@10"] == 1.0 and m["recall@10"] == 1.0
    assert m["precision@10"] == pytest.approx(2 / 10)
    assert m["ndcg@10"] == pytest.approx(m["ndcg"])


def test_no_relevant_candidate_scores_zero_everywhere() -> None:
    m = one_item([3, 2, 1], [0, 0, 0], at=(1, 2))
    assert all(value == 0.0 for value in m.values())


def _query_item(item_id: str, candidates: str, relevant: str) -> Item:
    return Item(
        id=item_id, query="calm piano", candidates=tuple(candidates), relevant=tuple(relevant)
    )


def test_single_gold_items_report_median_and_mean_rank() -> None:
    items = [
        _query_item("a", "vwxyz", "x"),
        _query_item("b", "vwxyz", "v"),
        _query_item("c", "vwxyz", "y"),
    ]
    predictions = {
        "a": {"v": 3, "w": 7, "x": 7, "y": 7, "z": 1},  # x tied at places 1-3: rank 2
        "b": {"v": 9, "w": 7, "x": 6, "y": 5, "z": 1},  # rank 1
        "c": {"v": 9, "w": 7, "x": 6, "y": 5, "z": 1},  # rank 4
    }
    result = aggregate([build_matrix(items, predictions)], n_bootstrap=200, at=(3,))
    assert list(result.per_item["mean_rank"]) == [2.0, 1.0, 4.0]
    assert result.metrics["median_rank"].mean == 2.0
    assert result.metrics["mean_rank"].mean == pytest.approx(7 / 3, abs=1e-6)
    names = list(result.to_json()["metrics"])  # type: ignore[arg-type]
    assert names == [
        *("hit@1", "mrr", "ndcg", "kendall_tau_b", "hit@3", "recall@3", "precision@3", "ndcg@3"),
        *("median_rank", "mean_rank"),
    ]
    assert set(result.per_item) == set(names)


def test_items_without_relevant_are_counted_and_rank_is_not_reported() -> None:
    items = [
        _query_item("a", "xyz", "x"),
        _query_item("b", "xyz", ""),
        _query_item("c", "xyz", "xy"),
    ]
    predictions = {k: {"x": 3.0, "y": 2.0, "z": 1.0} for k in "abc"}
    result = aggregate([build_matrix(items, predictions)], n_bootstrap=50, at=(1,))
    out = result.to_json()
    assert out["n_items_without_relevant"] == 1 and out["n_items"] == 3
    assert "median_rank" not in out["metrics"]  # type: ignore[operator]
    assert list(result.per_item["hit@1"]) == [1.0, 0.0, 1.0]
    assert list(result.per_item["recall@1"]) == [1.0, 0.0, 0.5]
    assert list(out["metrics"])[:5] == ["hit@1", "mrr", "ndcg", "kendall_tau_b", "recall@1"]  # type: ignore[call-overload]


def test_median_rank_over_repeats() -> None:
    items = [_query_item(k, "xyz", "x") for k in "abc"]
    first = {k: {"x": 3.0, "y": 2.0, "z": 1.0} for k in "abc"}  # ranks 1, 1, 1
    second = {k: {"x": 1.0, "y": 2.0, "z": 3.0} for k in "abc"}  # ranks 3, 3, 3
    result = aggregate([build_matrix(items, first), build_matrix(items, second)], n_bootstrap=50)
    median = result.metrics["median_rank"]
    assert median.repeats == [1.0, 3.0] and median.mean == 2.0
    assert list(result.per_item["median_rank"]) == [2.0, 2.0, 2.0]


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "5"])
def test_cutoffs_must_be_positive_integers(bad: object) -> None:
    with pytest.raises(HarnessError, match="cut-offs must be integers >= 1"):
        aggregate([build_matrix(ITEMS, {})], at=[bad])  # type: ignore[list-item]


def test_blocking_does_not_change_results(monkeypatch: pytest.MonkeyPatch) -> None:
    """Items are evaluated in blocks of similar candidate counts; any blocking gives the same."""
    rng = np.random.default_rng(3)
    sizes = rng.integers(2, 40, 60)
    scores = [np.round(rng.uniform(0, 4, n)) for n in sizes]
    for row in scores[::7]:
        row[0] = np.nan
    gains = [rng.integers(0, 3, n).astype(float) for n in sizes]
    matrix = ScoreMatrix([f"i{k}" for k in range(len(sizes))], scores, gains)
    whole = aggregate([matrix], n_bootstrap=50, at=(1, 5, 50)).per_item
    monkeypatch.setattr(metrics_module, "BLOCK_ELEMENTS", 40)
    blocked = aggregate([matrix], n_bootstrap=50, at=(1, 5, 50)).per_item
    for name, values in whole.items():
        np.testing.assert_allclose(blocked[name], values, rtol=0, atol=1e-12, err_msg=name)


def single_gold_matrix(n_items: int, seed: int = 4) -> ScoreMatrix:
    rng = np.random.default_rng(seed)
    scores = list(np.round(rng.uniform(0, 3, (n_items, 4))))
    gains = [np.array([1.0, 0.0, 0.0, 0.0])] * n_items
    return ScoreMatrix([f"i{k}" for k in range(n_items)], scores, gains)


def test_bootstrap_blocks_draw_the_stream_of_one_whole_draw(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Resamples drawn block by block continue one generator's stream, so the intervals equal
    those of the whole resample matrix drawn at once (earlier releases' recipe)."""
    matrix = single_gold_matrix(37)
    result = aggregate([matrix], n_bootstrap=203, seed=9, at=(2,))
    whole = np.random.default_rng(9).integers(0, 37, size=(203, 37))
    for name in ("hit@1", "mrr", "recall@2"):
        boot = result.per_item[name][whole].mean(axis=1)
        expected = tuple(round(float(x), 6) for x in np.percentile(boot, [2.5, 97.5]))
        assert result.metrics[name].ci95 == expected, name
    monkeypatch.setattr(metrics_module, "BOOTSTRAP_ELEMENTS", 37 * 3)
    assert aggregate([matrix], n_bootstrap=203, seed=9, at=(2,)).metrics == result.metrics


def test_bootstrap_memory_does_not_grow_with_resamples_times_items() -> None:
    """20,000 items x 2,000 resamples would be a 320 MB index matrix drawn whole."""
    import tracemalloc

    matrix = single_gold_matrix(20_000)
    tracemalloc.start()
    try:
        aggregate([matrix], n_bootstrap=2_000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 100 * 2**20
