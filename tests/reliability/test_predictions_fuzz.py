"""Predictions files (what `harness evaluate` and `harness report` read from a user) against
the one contract: metrics, or one clear line naming file and line with exit 2; never a
traceback, and never time or memory beyond what a file of that size asks for.

D8: `"repeat": 1000000` on one line made the evaluation build a million score matrices (every
repeat 0..R-1 without a line counts as every score missing): a file may name at most as many
repeats as it has lines."""

from __future__ import annotations

import json
import resource
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from harness.cli.main import app
from harness.core.dataset import load_dataset
from harness.core.errors import DatasetError
from harness.core.predictions import read_predictions
from harness.scoring.evaluation import evaluate_predictions
from tests.conftest import write_tiny_dataset

runner = CliRunner()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_dataset(tmp_path_factory.mktemp("data") / "data", n_items=3, seconds=0.1)


def _line(item: str = "d0", **fields: Any) -> str:
    return json.dumps({"item_id": item, "scores": {f"c{item[1:]}_0": 1.0}, **fields})


@pytest.mark.slow
@pytest.mark.parametrize("command", ["evaluate", "report"])
def test_d8_a_huge_repeat_is_one_clear_line_not_a_million_matrices(
    command: str, dataset: Path, tmp_path: Path
) -> None:
    predictions = tmp_path / "mine" / "predictions.jsonl"
    predictions.parent.mkdir()
    predictions.write_text(_line() + "\n" + _line("d1", repeat=100_000) + "\n")
    args = {
        "evaluate": ["evaluate", "--predictions", str(predictions), "--dataset", str(dataset)],
        "report": ["report", str(predictions.parent), "--dataset", str(dataset)],
    }[command]
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    result = runner.invoke(app, [*args, "--out", str(tmp_path / "out")])
    assert time.perf_counter() - started < 20
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before < 500_000  # KiB
    assert "Traceback" not in result.output
    message = " ".join(result.output.split())
    assert "predictions.jsonl:2: repeat 100000" in message, result.output
    if command == "evaluate":
        assert result.exit_code == 2
        assert len(result.output.strip().splitlines()) <= 2  # one line (wrapped at most once)


def test_d8_repeats_up_to_the_line_count_still_count_missing_ones(
    dataset: Path, tmp_path: Path
) -> None:
    """Repeat 1 without a line is every score missing (docs/formats.md): allowed."""
    path = tmp_path / "p.jsonl"
    path.write_text(_line() + "\n" + _line(repeat=2) + "\n" + _line("d1", repeat=2) + "\n")
    items = list(load_dataset(dataset).items)
    evaluation = evaluate_predictions(items, read_predictions(path, items), n_bootstrap=10)
    assert len(evaluation.matrices) == 3


# ---------------------------------------------------------------------------------- the fuzz
json_value = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**6), max_value=10**7)
    | st.floats()
    | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
item_id = st.sampled_from(["d0", "d1", "d2", "nope", ""])
candidate = st.sampled_from(["c0_0", "c0_1", "c0_2", "c0_3", "c1_0", "zz"])
prediction = st.fixed_dictionaries(
    {"item_id": item_id | json_value},
    optional={
        "scores": st.dictionaries(candidate, st.floats() | st.none() | json_value, max_size=5)
        | json_value,
        "ranking": st.lists(candidate, max_size=6) | json_value,
        "repeat": st.integers(min_value=-2, max_value=10**9) | json_value,
        "extra": json_value,
    },
)
raw_line = st.builds(json.dumps, prediction) | st.text(max_size=30) | st.just("{" * 5000)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(lines=st.lists(raw_line, max_size=6))
def test_any_predictions_file_gives_metrics_or_one_dataset_error(
    lines: list[str], dataset: Path, tmp_path: Path
) -> None:
    path = tmp_path / "fuzz.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogatepass")
    items = list(load_dataset(dataset).items)
    started = time.perf_counter()
    try:
        predictions = read_predictions(path, items)
    except DatasetError as exc:
        message = str(exc)
        assert "\n" not in message and str(path) in message
        return
    assert max(predictions, default=0) < max(len(lines), 1)
    evaluation = evaluate_predictions(items, predictions, n_bootstrap=10)
    assert len(evaluation.matrices) <= max(len(lines), 1)
    assert time.perf_counter() - started < 5
