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
