"""harness.scoring.ranking at import: scipy is loaded only when a metric needs it, so that
commands which never compute a metric (run --help, dry runs, status) start fast."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from harness.scoring.ranking import none_in_first


def test_importing_the_cli_and_the_runner_does_not_import_scipy() -> None:
    code = (
        "import sys, harness.cli, harness.runner, harness.scoring.ranking; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'scipy'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_none_in_first_is_the_hypergeometric_probability() -> None:
    # C(g-m, c) / C(g, c): 6 of 10 free, 2 marked -> C(6,2)/C(10,2) = 15/45; impossible -> 0
    got = none_in_first(np.array([4, 9]), np.array([10, 10]), np.array([2, 2]))
    np.testing.assert_allclose(got, [15 / 45, 0.0])


def test_evaluating_single_gold_items_does_not_import_scipy() -> None:
    """A pool with one gold per item (its tie group holds one relevant candidate) needs no
    hypergeometric term, so `harness evaluate` on such a pool never pays scipy's import."""
    code = (
        "import sys; from harness.dataset import Item; "
        "from harness.scoring.evaluation import evaluate_predictions; "
        "items = [Item(id=f'q{i}', query='calm', candidates=('a', 'b', 'c'), relevant=('b',)) "
        "for i in range(20)]; "
        "preds = {0: {f'q{i}': {'a': 1.0, 'b': 1.0, 'c': float(i % 3)} for i in range(20)}}; "
        "evaluate_predictions(items, preds, n_bootstrap=10, at=(1, 2)); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'scipy'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
