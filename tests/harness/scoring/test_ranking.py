"""harness.scoring.ranking at import: scipy is not loaded, so that
commands which never compute a metric (run --help, dry runs, status) start fast."""

from __future__ import annotations

import math
import subprocess
import sys
from fractions import Fraction

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from harness.scoring.ranking import none_in_first, survival
from harness.scoring.sorted_block import gain_side, one_gold_gain_side, sort_block
from harness.scoring.tau_b import counts_by_level, one_top_counts, pair_counts


def test_importing_the_cli_and_the_runner_does_not_import_scipy() -> None:
    code = (
        "import sys, harness.cli.main, harness.runs.runner, harness.scoring.ranking; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'scipy'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_none_in_first_is_the_hypergeometric_probability() -> None:
    # C(g-m, c) / C(g, c): 6 of 10 free, 2 marked -> C(6,2)/C(10,2) = 15/45; impossible -> 0
    got = none_in_first(np.array([4, 9]), np.array([10, 10]), np.array([2, 2]))
    np.testing.assert_allclose(got, [15 / 45, 0.0])


def _survival_in_python(g: int, c: int, upto: int) -> list[float]:
    """The same product with Python floats: each int / int and each product is one correctly
    rounded IEEE operation, the same bits on every CPU."""
    out, value = [1.0], 1.0
    for j in range(upto):
        value *= max(g - c - j, 0) / (g - j) if g - j > 0 else 0.0
        out.append(value)
    return out


@given(st.lists(st.tuples(st.integers(1, 600), st.integers(1, 600)), min_size=1, max_size=8))
def test_survival_is_the_same_bits_as_the_product_in_python_floats(pairs: list) -> None:
    """Bit for bit: no step may go through a function whose last bit depends on the CPU (an
    AVX-512 machine's numpy `exp` differs from others'), or per-item metrics of several-gold
    rows differ between machines."""
    g = np.array([max(a, b) for a, b in pairs])
    c = np.array([min(a, b) for a, b in pairs])
    upto = int((g - c).max()) + 2
    table = survival(g, c, upto)
    for row, (gi, ci) in enumerate(zip(g.tolist(), c.tolist(), strict=True)):
        assert table[row].tolist() == _survival_in_python(gi, ci, upto)


@given(st.integers(1, 300), st.data())
def test_survival_is_the_exact_ratio_of_binomials_to_12_digits(g: int, data: st.DataObject) -> None:
    c = data.draw(st.integers(1, g))
    m = data.draw(st.integers(0, g))
    exact = Fraction(math.comb(g - m, c), math.comb(g, c)) if g - m >= c else Fraction(0)
    got = survival(np.array([g]), np.array([c]), m)[0, m]
    assert math.isclose(got, float(exact), rel_tol=1e-12, abs_tol=1e-300)


def test_evaluating_single_gold_items_does_not_import_scipy() -> None:
    """`harness evaluate` on a pool never pays scipy's import (the hypergeometric term of
    several gold is a plain product)."""
    code = (
        "import sys; from harness.core.dataset import Item; "
        "from harness.scoring.evaluation import evaluate_predictions; "
        "items = [Item(id=f'q{i}', query='calm', candidates=('a', 'b', 'c'), relevant=('b',)) "
        "for i in range(20)]; "
        "preds = {0: {f'q{i}': {'a': 1.0, 'b': 1.0, 'c': float(i % 3)} for i in range(20)}}; "
        "evaluate_predictions(items, preds, n_bootstrap=10, at=(1, 2)); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'scipy'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@st.composite
def one_top_blocks(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Padded blocks where each row has one candidate of a higher gain than all its others
    (a single-gold pool; the lower gain need not be 0), scores on a coarse grid (ties)."""
    m, n = draw(st.integers(1, 6)), draw(st.integers(2, 12))
    lengths = np.array(draw(st.lists(st.integers(2, n), min_size=m, max_size=m)))
    scores = np.array(
        draw(st.lists(st.sampled_from([0.0, 1.0, 2.0, -np.inf]), min_size=m * n, max_size=m * n))
    ).reshape(m, n)
    low = draw(st.sampled_from([0.0, 0.25]))
    gains = np.full((m, n), low)
    for row, length in enumerate(lengths):
        gains[row, draw(st.integers(0, int(length) - 1))] = 0.5
        gains[row, length:] = 0.0
        scores[row, length:] = 0.0
    return scores, gains, lengths


@given(one_top_blocks())
def test_pair_counts_of_one_top_candidate_per_row_are_the_general_ones(
    block: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> None:
    """With one candidate above the rest in every row (one gold), the discordant pairs are
    those ranked strictly above it, and the pairs tied in both are the score-tied pairs
    less its own group's: the closed form gives the level-by-level counts exactly."""
    sorted_block = sort_block(*block)
    assert sorted_block.n_levels == 2 and not sorted_block.knight_order
    closed = one_top_counts(sorted_block)
    assert closed is not None
    assert "level" not in vars(sorted_block)  # the closed form needs no gain levels
    general = counts_by_level(sorted_block)
    assert closed[0].tolist() == general[0].tolist()
    assert closed[1].tolist() == general[1].tolist()


def test_pair_counts_fall_back_unless_every_row_has_one_top_candidate() -> None:
    scores = np.array([[1.0, 1.0, 0.0], [2.0, 1.0, 1.0]])
    two_gold = np.array([[0.5, 0.5, 0.0], [0.5, 0.0, 0.0]])
    no_gold = np.array([[0.5, 0.0, 0.0], [0.0, 0.0, 0.0]])
    lengths = np.array([3, 3])
    for gains in (two_gold, no_gold):
        block = sort_block(scores, gains, lengths)
        assert one_top_counts(block) is None
        assert [c.tolist() for c in pair_counts(block)] == [
            c.tolist() for c in counts_by_level(block)
        ]


@st.composite
def one_gold_rows(draw: st.DrawFn) -> np.ndarray:
    """Unpadded gains with one positive gain per row (any value; a single-gold pool's)."""
    m, n = draw(st.integers(1, 5)), draw(st.integers(2, 10))
    gains = np.zeros((m, n))
    for row in range(m):
        gains[row, draw(st.integers(0, n - 1))] = draw(st.sampled_from([0.5, 1.0, 3.0, 1e-300]))
    return gains


@given(one_gold_rows())
def test_the_gain_side_of_one_gold_rows_is_the_sorted_one(gains: np.ndarray) -> None:
    """Rows of one positive gain skip the sort of gains: the ideal order, the gain runs, the
    gain-tied pairs and the dense levels equal the general computation's exactly."""
    m, n = gains.shape
    lengths = np.full(m, n)
    valid = np.ones((m, n), dtype=bool)
    fast = one_gold_gain_side(gains, lengths)
    assert fast is not None
    general = gain_side(gains, valid)
    for a, b in zip(fast, general, strict=True):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()


def test_the_gain_side_shortcut_takes_only_unpadded_one_gold_rows() -> None:
    two = np.array([[0.5, 0.5, 0.0]])
    none = np.array([[0.0, 0.0, 0.0]])
    assert one_gold_gain_side(two, np.array([3])) is None
    assert one_gold_gain_side(none, np.array([3])) is None
    assert one_gold_gain_side(np.array([[0.5, 0.0, 0.0]]), np.array([2])) is None  # padded
