"""`harness.report` and `harness.compare` for a notebook: the DataFrames of what `harness
report` and `harness compare` write (one pipeline), printing nothing."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

import harness
from harness.cli.main import app
from harness.core.errors import HarnessError


@pytest.fixture
def sweep(tmp_path: Path, tiny_dataset: Path) -> Path:
    """A finished sweep of two runs (random scorers of two seeds, 3 items x 4 candidates)."""
    settings = {
        "name": "pair",
        "dataset": str(tiny_dataset),
        "providers": [{"name": "random", "seed": 1}, {"name": "random", "seed": 2, "label": "r2"}],
        "inputs": [{"music": "caption"}],
        "n_bootstrap": 50,
    }
    harness.run(
        settings, results_dir=tmp_path / "results", cache_dir=tmp_path / "c", show_progress=False
    )
    return tmp_path / "results" / "pair"


def test_report_returns_the_tables_the_command_writes(
    sweep: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    base = sweep / "random_uniform_full_caption"
    made = harness.report(sweep, out=tmp_path / "py", baseline=base, html=False)
    assert capsys.readouterr() == ("", "")  # a notebook's cell prints nothing
    assert isinstance(made.runs, pd.DataFrame) and list(made.runs["run"]) == ["random", "r2"]
    assert {p.name for p in made.figures} >= {"metrics.png"}
    assert all(p.parent == tmp_path / "py" and p.is_file() for p in made.files)
    cli = CliRunner().invoke(
        app, ["report", str(sweep), "--out", str(tmp_path / "cli"), "--baseline", str(base)]
    )
    assert cli.exit_code == 0, cli.output
    for name, frame in (("comparison.csv", made.runs), ("paired.csv", made.paired)):
        with (tmp_path / "cli" / name).open() as file:
            rows = list(csv.DictReader(file))
        assert len(rows) == len(frame) > 0
        shown = frame.astype(object).where(frame.notna(), "")
        assert [{k: str(v) for k, v in row.items()} for row in shown.to_dict("records")] == [
            {k: v.replace(str(tmp_path / "cli"), str(tmp_path / "py")) for k, v in row.items()}
            for row in rows
        ]
    assert harness.report(sweep).files == []  # no out: nothing written
    with pytest.raises(HarnessError, match="nowhere: not found"):
        harness.report(tmp_path / "nowhere")


def test_compare_returns_the_decision_the_command_writes(sweep: Path, tmp_path: Path) -> None:
    a, b = sweep / "random_uniform_full_caption", sweep / "random_r2_full_caption"
    fixed = harness.compare(a, b, metric="mrr")
    assert list(fixed.steps.columns) == ["n", "mean", "lo", "hi", "p_value"]
    assert len(fixed.steps) == 1 and fixed.files == []
    seq = harness.compare(a, b, sequential=True, batch_size=1, out=tmp_path / "seq")
    assert list(seq.steps["n"]) == list(range(1, len(seq.steps) + 1))
    written = json.loads((tmp_path / "seq" / "compare.json").read_text())
    assert seq.decision == written["decision"] and seq.files[0] == tmp_path / "seq" / "compare.json"
    assert seq.steps.to_dict("records") == written["path"]
    cli = CliRunner().invoke(
        app, ["compare", str(a), str(b), "--metric", "mrr", "--out", str(tmp_path / "cli")]
    )
    assert cli.exit_code == 0, cli.output
    test = json.loads((tmp_path / "cli" / "compare.json").read_text())["test"]
    assert fixed.steps.loc[0, "p_value"] == test["p_value"] and fixed.line() in " ".join(
        cli.stdout.split()
    )
    with pytest.raises(HarnessError, match="--finite needs --sequential"):
        harness.compare(a, b, finite=True)
