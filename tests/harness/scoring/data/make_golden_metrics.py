"""How golden_metrics/*.json were made (not run by the tests): each case of
test_golden_metrics.py evaluated by `harness evaluate`, and the sha256 of its per-item
values, on main at 1f472bb, before the pool evaluation speed work of issue 26 (goal 5).
The per-item digests were made again when several-gold Hit@K and MRR moved from log-gamma and
`exp` (whose last bit differs on AVX-512 machines) to a product of correctly rounded steps;
every metrics.json stayed byte for byte the same:

    .venv/bin/python -m tests.harness.scoring.data.make_golden_metrics
"""

import json
import tempfile
from pathlib import Path

from tests.harness.scoring.test_golden_metrics import CASES, GOLDEN, evaluate_case, per_item_digests

GOLDEN.mkdir(exist_ok=True)
with tempfile.TemporaryDirectory() as work:
    for name in sorted(CASES):
        (GOLDEN / f"{name}.json").write_bytes(evaluate_case(name, Path(work)))
    digests = {name: per_item_digests(name, Path(work) / "digests") for name in sorted(CASES)}
    (GOLDEN / "per_item_sha256.json").write_text(json.dumps(digests, indent=1) + "\n")
