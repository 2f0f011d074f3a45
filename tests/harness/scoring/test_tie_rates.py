"""The two tie rates of metrics.json: `tie_rate` (the top score shared) and
`tie_rate_ranking` (a score shared anywhere by candidates of different gain: the ties whose
order moves a gain-based metric, so that a tool breaking them can disagree with the
harness's tie-aware figure)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.scoring.metrics import ScoreMatrix, aggregate, block_metrics, metric_names

AT = (1, 2, 3)


def _one(scores: list[float], gains: list[float]) -> tuple[dict[str, float], bool, bool]:
    values, block = block_metrics(
        np.array([scores]),
        np.array([gains]),
        np.array([len(scores)], dtype=np.int64),
        metric_names(AT),
    )
    one = {name: float(v[0]) for name, v in values.items()}
    return one, bool(block.top_tied[0]), bool(block.mixed_tied[0])


def _broken(scores: list[float], gains: list[float], best_first: bool) -> list[float]:
    """Scores without ties, each tie broken by gain (best or worst first)."""
    order = sorted(
        range(len(scores)), key=lambda i: (-scores[i], -gains[i] if best_first else gains[i])
    )
    broken = [0.0] * len(scores)
    for place, i in enumerate(order):
        broken[i] = float(len(scores) - place)
    return broken


def test_a_tie_below_the_top_counts_only_in_the_ranking_rate() -> None:
    """Failing first (issue 49): only ties at the top were reported; the TREC export's
    "tie rate 0.0000" promised agreement that this tie (gains 1 and 0 at places 2-3) breaks."""
    matrix = ScoreMatrix(
        ["below", "top", "equal"],
        [np.array([9.0, 5.0, 5.0, 1.0]), np.array([9.0, 9.0, 5.0, 1.0]), np.array([3, 2, 2, 1.0])],
        [np.array([2.0, 1.0, 0.0, 0.0]), np.array([0.0, 0.0, 1.0, 0.0]), np.array([1, 0, 0, 0.0])],
    )
    result = aggregate([matrix], n_bootstrap=10)
    assert result.tie_rate == pytest.approx(1 / 3)  # "top": two zero-gain candidates
    assert result.tie_rate_ranking == pytest.approx(1 / 3)  # "below" only
    assert result.to_json()["tie_rate_ranking"] == round(1 / 3, 6)


def test_unscored_candidates_of_different_gain_tie() -> None:
    _, top, mixed = _one([2.0, -np.inf, -np.inf], [0.0, 1.0, 0.0])
    assert not top and mixed


score_and_gains = st.integers(min_value=2, max_value=7).flatmap(
    lambda n: st.tuples(
        st.lists(st.sampled_from([0.0, 1.0, 2.0]), min_size=n, max_size=n),
        st.lists(st.sampled_from([0.0, 0.0, 1.0, 2.0]), min_size=n, max_size=n),
    )
)


@settings(max_examples=300, deadline=None)
@given(score_and_gains)
def test_no_mixed_tie_means_any_tie_break_gives_the_harness_figures(
    case: tuple[list[float], list[float]],
) -> None:
    """Without a tie between candidates of different gain, every way of breaking the ties
    gives every gain-based metric its tie-aware value; with one, nDCG moves."""
    scores, gains = case
    ours, _, mixed = _one(scores, gains)
    best, _, _ = _one(_broken(scores, gains, best_first=True), gains)
    worst, _, _ = _one(_broken(scores, gains, best_first=False), gains)
    names = [name for name in ours if name != "kendall_tau_b"]  # tau-b breaks no tie
    if not mixed:
        for name in names:
            assert best[name] == pytest.approx(ours[name], abs=1e-12), name
            assert worst[name] == pytest.approx(ours[name], abs=1e-12), name
    elif max(gains) > 0:
        assert worst["ndcg"] < ours["ndcg"] < best["ndcg"]
