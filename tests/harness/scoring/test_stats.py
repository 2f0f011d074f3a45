from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import kendalltau

from harness.core.dataset import Item
from harness.core.records import Record
from harness.scoring.stats import (
    agreement_matrix,
    paired_difference,
    paired_metrics,
    position_bias,
    sign_flip_p_value,
)


def test_identical_runs_have_zero_difference_and_p_one() -> None:
    values = np.random.default_rng(0).uniform(size=40)
    result = paired_difference(values, values.copy())
    assert result.difference == 0.0
    assert result.ci95 == (0.0, 0.0)
    assert result.p_value == 1.0


def test_identical_runs_p_one_also_with_monte_carlo() -> None:
    values = np.random.default_rng(1).uniform(size=300)  # 2**300 patterns: Monte Carlo
    result = paired_difference(values, values.copy(), n_permutations=2000)
    assert not result.exact
    assert result.p_value == 1.0


def test_strictly_better_on_every_item_gives_small_p() -> None:
    rng = np.random.default_rng(2)
    baseline = rng.uniform(0, 0.5, size=30)
    better = baseline + rng.uniform(0.1, 0.5, size=30)
    result = paired_difference(better, baseline, n_permutations=5000)
    assert result.difference > 0
    assert result.ci95[0] > 0
    assert result.p_value < 0.001  # Monte Carlo: (0 + 1) / (5000 + 1)


def test_exact_p_for_small_n_matches_enumeration() -> None:
    d = np.array([0.5, -0.2, 0.3, 0.1, 0.0, 0.4, -0.1])
    p, exact = sign_flip_p_value(d)
    observed = abs(d.mean())
    flips = [abs(np.mean(np.array(s) * d)) for s in itertools.product([-1, 1], repeat=d.size)]
    expected = np.mean([f >= observed - 1e-12 for f in flips])
    assert exact
    assert p == pytest.approx(expected)


def test_strictly_better_on_ten_items_exact_p() -> None:
    # Only the all-plus and all-minus sign patterns are as extreme: p = 2 / 2**10.
    p, exact = sign_flip_p_value(np.full(10, 0.25))
    assert exact
    assert p == pytest.approx(2 / 1024)


def test_monte_carlo_is_seeded() -> None:
    d = np.random.default_rng(3).normal(0.05, 1, size=100)
    assert sign_flip_p_value(d, seed=7) == sign_flip_p_value(d, seed=7)


def test_paired_metrics_use_shared_items_only() -> None:
    run = {"hit@1": {"a": 1.0, "b": 1.0, "c": 0.0}}
    base = {"hit@1": {"b": 0.0, "c": 0.0, "d": 1.0}}
    result = paired_metrics(run, base)["hit@1"]
    assert result.n_items == 2
    assert result.difference == pytest.approx(0.5)


def test_agreement_is_per_item_tau_b_averaged() -> None:
    rng = np.random.default_rng(4)
    left = {f"i{k}": rng.integers(0, 3, size=4).astype(float) for k in range(20)}
    right = {f"i{k}": rng.integers(0, 3, size=4).astype(float) for k in range(20)}
    right["only-right"] = np.zeros(4)
    agreement = agreement_matrix([("a", left), ("b", right)])
    expected = np.mean([np.nan_to_num(kendalltau(left[k], right[k]).statistic) for k in left])
    assert agreement.tau[0, 1] == pytest.approx(expected)
    assert agreement.tau[1, 0] == agreement.tau[0, 1]
    assert agreement.n_items[0, 1] == 20
    assert agreement.tau[0, 0] <= 1.0


def test_agreement_of_reversed_rankings_is_minus_one() -> None:
    forward = {"x": np.array([1.0, 2.0, 3.0, 4.0]), "y": np.array([4.0, 3.0, 2.0, 1.0])}
    backward = {k: -v for k, v in forward.items()}
    agreement = agreement_matrix([("f", forward), ("b", backward)])
    assert agreement.tau[0, 1] == pytest.approx(-1.0)
    assert agreement.tau[0, 0] == pytest.approx(1.0)


def test_agreement_missing_scores_tie_last() -> None:
    with_missing = {"x": np.array([3.0, np.nan, 1.0, np.nan])}
    explicit = {"x": np.array([3.0, -1.0, 1.0, -1.0])}
    assert agreement_matrix([("m", with_missing), ("e", explicit)]).tau[0, 1] == pytest.approx(1.0)


def test_agreement_with_mixed_candidate_counts() -> None:
    a = {"x": np.array([1.0, 2.0, 3.0]), "y": np.array([1.0, 2.0, 3.0, 4.0])}
    b = {"x": np.array([1.0, 2.0, 3.0]), "y": np.array([4.0, 3.0, 2.0, 1.0])}
    assert agreement_matrix([("a", a), ("b", b)]).tau[0, 1] == pytest.approx(0.0)


def _joint(order: list[str], scores: list[float | None], **kw: object) -> Record:
    return Record(
        item_id="d",
        candidates=order,
        raw="{}",
        scores=dict(zip(order, scores, strict=True)),
        **kw,  # type: ignore[arg-type]
    )


def test_position_bias_always_first() -> None:
    records = [_joint(["a", "b", "c", "d"], [9.0, 1.0, 2.0, 3.0]) for _ in range(40)]
    bias = position_bias(records)
    assert bias is not None
    assert bias.rates.tolist() == [1.0, 0.0, 0.0, 0.0]
    assert bias.uniform == 0.25
    assert bias.p_value < 1e-6


def test_position_bias_uses_presentation_order_not_candidate_id() -> None:
    # The same candidate "a" wins every time but is shown at each position in turn.
    orders = [
        ["a", "b", "c", "d"],
        ["b", "a", "c", "d"],
        ["c", "b", "a", "d"],
        ["d", "b", "c", "a"],
    ]
    records = [_joint(o, [9.0 if c == "a" else 1.0 for c in o]) for o in orders * 5]
    bias = position_bias(records)
    assert bias is not None
    assert bias.rates.tolist() == [0.25, 0.25, 0.25, 0.25]
    assert bias.p_value == pytest.approx(1.0)


def test_position_bias_splits_ties_and_skips_pointwise_and_failures() -> None:
    records = [
        _joint(["a", "b", "c", "d"], [5.0, 5.0, 1.0, None]),
        _joint(["a", "b", "c", "d"], [None, None, None, None], parse_error="not_json: x"),
        Record(item_id="d", candidates=["a"], raw='{"score": 3}', scores={"a": 3.0}),
        Record(item_id="d", candidates=["a", "b"], scores={"a": 0.1, "b": 0.2}),  # a scorer
    ]
    bias = position_bias(records)
    assert bias is not None
    assert bias.n_calls == 1
    assert bias.rates.tolist() == [0.5, 0.5, 0.0, 0.0]


def test_position_bias_reports_where_the_human_first_was_shown() -> None:
    item = Item(
        id="d",
        dialogue=({"speaker": "A", "text": "hi"},),
        candidates=("a", "b", "c", "d"),
        human_ranking=("c", "a", "b", "d"),
    )
    records = [
        _joint(["c", "a", "b", "d"], [1.0, 9.0, 1.0, 1.0]),
        _joint(["a", "c", "b", "d"], [1.0, 9.0, 1.0, 1.0]),
    ]
    bias = position_bias(records, [item])
    assert bias is not None
    assert bias.rates.tolist() == [0.0, 1.0, 0.0, 0.0]
    assert bias.human_rates.tolist() == [0.5, 0.5, 0.0, 0.0]


def test_position_bias_none_without_joint_calls() -> None:
    assert (
        position_bias([Record(item_id="d", candidates=["a"], raw="x", scores={"a": 1.0})]) is None
    )


# ------------------------------------------------------------------------ many p-values
def _holm_by_definition(p: list[float]) -> list[float]:
    """Holm (1979): the i-th smallest p times (m - i + 1), made monotone, capped at 1."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    out = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out


def _bh_by_definition(p: list[float]) -> list[float]:
    """Benjamini-Hochberg: min over j >= i of m p_(j) / j, capped at 1."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    out = [0.0] * m
    for rank, i in enumerate(order):
        out[i] = min(1.0, min(m * p[order[j]] / (j + 1) for j in range(rank, m)))
    return out


def test_adjusted_p_values_on_a_worked_example() -> None:
    from harness.scoring.stats import adjust_p_values

    p = [0.01, 0.04, 0.03, 0.005]
    assert list(adjust_p_values(p, "holm")) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert list(adjust_p_values(p, "bh")) == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert list(adjust_p_values(p, "none")) == p
    assert list(adjust_p_values([0.2], "holm")) == [0.2]


@given(st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=1, max_size=30))
def test_adjusted_p_values_match_their_definitions(p: list[float]) -> None:
    from harness.scoring.stats import adjust_p_values

    assert list(adjust_p_values(p, "holm")) == pytest.approx(_holm_by_definition(p))
    assert list(adjust_p_values(p, "bh")) == pytest.approx(_bh_by_definition(p))
    assert all(a >= q - 1e-12 for a, q in zip(adjust_p_values(p, "holm"), p, strict=True))


def test_agreement_leaves_out_an_item_a_ranker_did_not_score() -> None:
    """A ranker against itself agrees fully: an item it has no score for is not one both
    scored (it used to count as tau 0 and pull 1.000 down to 0.962)."""
    rng = np.random.default_rng(5)
    given = {f"i{k}": rng.permutation(4).astype(float) for k in range(25)}
    given["unscored"] = np.full(4, np.nan)
    agreement = agreement_matrix([("a", given), ("copy", dict(given))])
    assert agreement.tau.tolist() == [[1.0, 1.0], [1.0, 1.0]]
    assert agreement.n_items.tolist() == [[25, 25], [25, 25]]


def _tau_by_definition(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall's tau-b of one item by its pairs (missing = tied below every score; 0 where a
    side is all tied)."""
    x, y = np.where(np.isnan(x), -np.inf, x), np.where(np.isnan(y), -np.inf, y)
    concordant = discordant = tied_x = tied_y = 0
    for a, b in itertools.combinations(range(len(x)), 2):
        dx = int(x[a] > x[b]) - int(x[a] < x[b])  # -inf - -inf would be NaN
        dy = int(y[a] > y[b]) - int(y[a] < y[b])
        if dx == 0 and dy == 0:
            continue
        if dx == 0:
            tied_x += 1
        elif dy == 0:
            tied_y += 1
        elif dx == dy:
            concordant += 1
        else:
            discordant += 1
    n0 = concordant + discordant
    denominator = np.sqrt((n0 + tied_x) * (n0 + tied_y))
    return float((concordant - discordant) / denominator) if denominator else 0.0


SCORE = st.sampled_from([0.0, 1.0, 2.0, 3.0, float("nan")])


@given(st.lists(st.integers(2, 5), min_size=1, max_size=8), st.integers(1, 4), st.data())
def test_agreement_matrix_is_the_mean_tau_over_the_items_both_scored(
    widths: list[int], n_rankers: int, data: st.DataObject
) -> None:
    """Every pair of rankers: the mean per-item tau-b over the items both have, both scored
    and with as many candidates; whatever each ranker's item order and width."""
    vectors = []
    for r in range(n_rankers):
        given = {}
        for i, width in enumerate(widths):
            if data.draw(st.booleans(), label="has item"):
                n = width + (1 if data.draw(st.integers(0, 4)) == 0 else 0)  # another width
                given[f"i{i}"] = np.array(data.draw(st.lists(SCORE, min_size=n, max_size=n)))
        order = data.draw(st.permutations(list(given)))
        vectors.append((f"r{r}", {item: given[item] for item in order}))
    agreement = agreement_matrix(vectors)
    for (i, (_, left)), (j, (_, right)) in itertools.product(enumerate(vectors), repeat=2):
        shared = [
            item
            for item in left
            if item in right
            and len(left[item]) == len(right[item])
            and not np.isnan(left[item]).all()
            and not np.isnan(right[item]).all()
        ]
        assert agreement.n_items[i, j] == len(shared)
        if not shared:
            assert np.isnan(agreement.tau[i, j])
            continue
        taus = [_tau_by_definition(left[s], right[s]) for s in shared]
        assert agreement.tau[i, j] == pytest.approx(np.mean(taus), abs=1e-12)
