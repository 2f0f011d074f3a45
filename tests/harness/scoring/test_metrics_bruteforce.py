"""Every metric and cut-off against brute-force enumeration of all tie-breaks (small N), for
binary multi-gold, empty gold, graded and DialBGM (ranking) relevance, with missing scores;
and the sort-based Kendall's tau-b against scipy at larger N, both counting paths."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.stats import kendalltau

from harness.scoring import sorted_block
from harness.scoring.metrics import ScoreMatrix, aggregate, per_item_metrics
from harness.scoring.tau_b import kendall_tau_b

GRID = [0.0, 2.5, 5.0, 7.5, 10.0]


def strict_orders(scores: list[float]) -> list[tuple[int, ...]]:
    """Every best-first order of the candidates consistent with the scores (ties broken
    every possible way; each is equally likely under uniform tie-breaking)."""
    n = len(scores)
    return [
        order
        for order in itertools.permutations(range(n))
        if all(scores[order[i]] >= scores[order[i + 1]] for i in range(n - 1))
    ]


def tau_b(x: list[float], y: list[float]) -> float:
    """Kendall's tau-b from its definition, over all pairs."""
    pairs = list(itertools.combinations(range(len(x)), 2))
    s = sum(np.sign(x[i] - x[j]) * np.sign(y[i] - y[j]) for i, j in pairs)
    untied_x = sum(x[i] != x[j] for i, j in pairs)
    untied_y = sum(y[i] != y[j] for i, j in pairs)
    return 0.0 if untied_x * untied_y == 0 else float(s / math.sqrt(untied_x * untied_y))


def brute_force(scores: list[float], gains: list[float], at: list[int]) -> dict[str, float]:
    """Mean of each metric over every tie-break; missing scores must already be lowered."""
    n = len(scores)
    top, n_relevant = max(gains), sum(g > 0 for g in gains)
    ideal = sorted(gains, reverse=True)

    def dcg(ranked: list[float], k: int) -> float:
        return sum(g / math.log2(i + 2) for i, g in enumerate(ranked[:k]))

    def one(order: tuple[int, ...]) -> dict[str, float]:
        ranked = [gains[c] for c in order]
        if top <= 0:
            return dict.fromkeys(names, 0.0) | {"kendall_tau_b": tau_b(scores, gains)}
        first = next(i for i, g in enumerate(ranked) if g == top)
        out = {
            "hit@1": float(first == 0),
            "mrr": 1 / (first + 1),
            "ndcg": dcg(ranked, n) / dcg(ideal, n),
        }
        for k in at:
            found = sum(g > 0 for g in ranked[:k])
            out[f"hit@{k}"] = float(first < k)
            out[f"recall@{k}"] = found / n_relevant
            out[f"precision@{k}"] = found / k
            out[f"ndcg@{k}"] = dcg(ranked, k) / dcg(ideal, k)
        out["kendall_tau_b"] = tau_b(scores, gains)
        if n_relevant == 1:
            out["rank"] = first + 1
        return out

    names = [
        "hit@1",
        "mrr",
        "ndcg",
        *(f"{m}@{k}" for m in ("hit", "recall", "precision", "ndcg") for k in at),
    ]
    results = [one(order) for order in strict_orders(scores)]
    return {name: float(np.mean([r[name] for r in results])) for name in results[0]}


def gains_of(kind: str, n: int, draw: st.DrawFn) -> list[float]:
    if kind == "ranking":
        return [float(r) for r in draw(st.permutations(list(range(n))))]
    if kind == "binary":  # several gold, one, or none
        return [float(b) for b in draw(st.lists(st.booleans(), min_size=n, max_size=n))]
    return draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0]), min_size=n, max_size=n))


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[float], list[float]]:
    """(scores with NaN for missing, gains) for one item of 2 to 6 candidates."""
    n = draw(st.integers(min_value=2, max_value=6))
    scores = draw(st.lists(st.sampled_from([*GRID, math.nan]), min_size=n, max_size=n))
    kind = draw(st.sampled_from(["ranking", "binary", "graded"]))
    return scores, gains_of(kind, n, draw)


AT = [1, 2, 3, 5, 7]


@pytest.fixture(params=["by_level", "by_tree"])
def counting(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test with pairs counted level by level, and with the Fenwick tree."""
    if request.param == "by_tree":
        monkeypatch.setattr(sorted_block, "FEW_LEVELS", 0)
    return str(request.param)


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(cases(), min_size=1, max_size=5))
def test_every_metric_matches_brute_force(
    counting: str, items: list[tuple[list[float], list[float]]]
) -> None:
    """Items of mixed sizes in one matrix (padding), missing scores under policy worst."""
    matrix = ScoreMatrix(
        [f"i{k}" for k in range(len(items))],
        [np.array(scores) for scores, _ in items],
        [np.array(gains) for _, gains in items],
    )
    result = aggregate([matrix], n_bootstrap=10, at=AT)
    single_gold = all(sum(g > 0 for g in gains) == 1 for _, gains in items)
    assert ("median_rank" in result.per_item) is single_gold
    for row, (scores, gains) in enumerate(items):
        lowered = [-1.0 if math.isnan(s) else s for s in scores]
        expected = brute_force(lowered, gains, AT)
        for name, value in expected.items():
            key = "mean_rank" if name == "rank" else name
            if key in result.per_item:
                assert result.per_item[key][row] == pytest.approx(value, abs=1e-9), (
                    name,
                    scores,
                    gains,
                )


@settings(max_examples=200, deadline=None)
@given(cases())
def test_per_item_metrics_on_one_block(case: tuple[list[float], list[float]]) -> None:
    scores, gains = case
    lowered = [-np.inf if math.isnan(s) else s for s in scores]
    ours = per_item_metrics(np.array([lowered]), np.array([gains]), at=AT)
    expected = brute_force([-1.0 if math.isinf(s) else s for s in lowered], gains, AT)
    assert set(ours) == {name for name in expected if name != "rank"}
    for name, values in ours.items():
        assert values[0] == pytest.approx(expected[name], abs=1e-9), name


# ------------------------------------------------------------------------ Kendall's tau-b
@st.composite
def wide_rows(draw: st.DrawFn) -> tuple[list[float], list[float]]:
    """20 to 60 candidates, scores and gains from few or many distinct values (ties)."""
    n = draw(st.integers(min_value=20, max_value=60))
    score_values = draw(st.integers(min_value=1, max_value=30))
    gain_values = draw(st.integers(min_value=1, max_value=40))
    scores = draw(st.lists(st.integers(0, score_values - 1), min_size=n, max_size=n))
    gains = draw(st.lists(st.integers(0, gain_values - 1), min_size=n, max_size=n))
    return [float(s) for s in scores], [float(g) for g in gains]


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(wide_rows(), min_size=1, max_size=4))
def test_tau_b_matches_scipy_at_larger_n(
    counting: str, rows: list[tuple[list[float], list[float]]]
) -> None:
    for scores, gains in rows:
        reference = kendalltau(scores, gains, variant="b").statistic
        expected = 0.0 if np.isnan(reference) else reference
        assert kendall_tau_b(np.array([scores]), np.array([gains]))[0] == pytest.approx(
            expected, abs=1e-12
        )
        metrics = per_item_metrics(np.array([scores]), np.array([gains]))
        assert metrics["kendall_tau_b"][0] == pytest.approx(expected, abs=1e-12)


def test_tau_b_with_infinite_values_on_both_sides() -> None:
    """harness.scoring.stats passes missing scores as -inf on both sides."""
    x = np.array([[1.0, -np.inf, -np.inf, 3.0, 2.0]])
    y = np.array([[-np.inf, 2.0, 1.0, -np.inf, 0.5]])
    finite_x, finite_y = np.where(np.isinf(x), -9.0, x), np.where(np.isinf(y), -9.0, y)
    reference = kendalltau(finite_x[0], finite_y[0], variant="b").statistic
    assert kendall_tau_b(x, y)[0] == pytest.approx(reference, abs=1e-12)


narrow_values = st.sampled_from([-np.inf, 0.0, 0.5, 1.0, 2.0, 2.5, 7.0])


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 8).flatmap(
        lambda n: st.lists(
            st.tuples(
                st.lists(narrow_values, min_size=n, max_size=n),
                st.lists(narrow_values, min_size=n, max_size=n),
            ),
            min_size=1,
            max_size=6,
        )
    )
)
def test_kendall_tau_b_of_narrow_rows_is_scipys(
    rows: list[tuple[list[float], list[float]]],
) -> None:
    """Row-wise tau-b between two score matrices, ties and -inf (a missing score, on either
    side) included."""
    x = np.array([r[0] for r in rows])
    y = np.array([r[1] for r in rows])
    finite_x, finite_y = np.where(np.isinf(x), -9.0, x), np.where(np.isinf(y), -9.0, y)
    for k in range(len(rows)):
        reference = kendalltau(finite_x[k], finite_y[k], variant="b").statistic
        expected = 0.0 if np.isnan(reference) else reference
        assert kendall_tau_b(x[k : k + 1], y[k : k + 1])[0] == pytest.approx(expected, abs=1e-12)
