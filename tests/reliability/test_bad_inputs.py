"""Malformed datasets, experiment files and predictions: one clear error line, exit code 2.

Each case of `bad_inputs/cases.yaml` names a malformed input and the substring its error line
must contain (file, line or field, reason). The CLI must print exactly that one line on
stderr, exit with code 2, show no traceback and write nothing under the results folder.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from harness.cli.main import app
from tests.reliability.conftest import write_dataset

BAD = Path(__file__).parent / "bad_inputs"
CASES: list[dict[str, Any]] = yaml.safe_load((BAD / "cases.yaml").read_text())


@pytest.fixture(scope="module")
def base_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dataset(tmp_path_factory.mktemp("base") / "data", n_items=2)


def _prepare(case: dict[str, Any], base: Path, work: Path) -> list[str]:
    """Lay out the case under `work` (the current directory) and return the CLI arguments."""
    source = BAD / case["case"]
    kind = case["case"].split("/")[0]
    shutil.copytree(base, work / "data")
    common = ["--results-dir", "results", "--cache-dir", "cache", "--no-progress"]
    if kind == "datasets":
        shutil.copytree(
            source, work / "data", dirs_exist_ok=True, ignore=shutil.ignore_patterns(".keep")
        )
        for name in case.get("remove", []):
            (work / "data" / name).unlink()
        experiment = {"name": "bad", "dataset": "data", "provider": {"name": "mock"}}
        experiment.update(case.get("experiment", {}))
        (work / "exp.yaml").write_text(yaml.safe_dump(experiment))
        return ["run", "exp.yaml", *common]
    if kind == "experiments":
        (work / source.name).write_bytes(source.read_bytes().replace(b"DATASET", b"data"))
        return ["run", source.name, *common]
    assert kind == "predictions", case
    shutil.copy(source, work / source.name)
    return [
        "evaluate",
        "--dataset",
        "data",
        "--predictions",
        source.name,
        "--out",
        "results/m.json",
    ]


def _check(case: dict[str, Any], exit_code: int, stderr: str, output: str, work: Path) -> None:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert exit_code == 2, output
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: "), lines[0]
    assert case["expect"] in lines[0]
    assert "Traceback" not in output
    results = work / "results"
    assert not results.exists() or not any(results.iterdir())


def test_corpus_is_large_and_every_case_exists() -> None:
    assert len(CASES) >= 30
    assert sum(c["case"].startswith("datasets/") for c in CASES) >= 15
    assert sum(c["case"].startswith("experiments/") for c in CASES) >= 15
    for case in CASES:
        assert (BAD / case["case"]).exists(), case["case"]


@pytest.mark.parametrize("case", CASES, ids=[c["case"] for c in CASES])
def test_bad_input_gives_one_error_line_and_exit_2(
    case: dict[str, Any], base_dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    args = _prepare(case, base_dataset, tmp_path)
    result = CliRunner().invoke(app, args)
    assert not isinstance(result.exception, Exception) or isinstance(
        result.exception, SystemExit
    ), result.exception
    _check(case, result.exit_code, result.stderr, result.output, tmp_path)


SUBPROCESS_CASES = [
    "datasets/items_not_utf8",
    "experiments/unknown_provider.yaml",
    "predictions/score_nan.jsonl",
]


@pytest.mark.parametrize("name", SUBPROCESS_CASES)
def test_bad_input_in_a_real_process(name: str, base_dataset: Path, tmp_path: Path) -> None:
    (case,) = [c for c in CASES if c["case"] == name]
    args = _prepare(case, base_dataset, tmp_path)
    harness = Path(sys.executable).parent / "harness"
    done = subprocess.run(
        [str(harness), *args], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    _check(case, done.returncode, done.stderr, done.stdout + done.stderr, tmp_path)
