"""Command-line values that used to crash or be silently accepted: each is one error line
naming the option, exit code 2, no traceback, and nothing sent or written."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from harness.cli.main import app
from tests.reliability.conftest import MakeDataset


def _prepare(tmp_path: Path, make_dataset: MakeDataset) -> None:
    make_dataset(n_items=3)
    (tmp_path / "exp.yaml").write_text(
        yaml.safe_dump({"name": "x", "dataset": "data", "provider": {"name": "mock"}})
    )
    (tmp_path / "p.jsonl").write_text('{"item_id": "d0", "scores": {"c0_0": 1.0}}\n')
    (tmp_path / "a_file").write_text("not a folder\n")
    (tmp_path / "a_folder").mkdir()


RUN = ["run", "exp.yaml", "--no-progress"]
EVALUATE = ["evaluate", "--dataset", "data", "--predictions", "p.jsonl"]
CASES = {
    "limit_negative": ([*RUN, "--limit", "-1"], "--limit"),
    "limit_zero": ([*RUN, "--limit", "0"], "--limit"),
    "results_dir_is_a_file": ([*RUN, "--results-dir", "a_file"], "a_file"),
    "results_dir_below_a_file": ([*RUN, "--results-dir", "a_file/sub"], "a_file"),
    "cache_dir_is_a_file": ([*RUN, "--cache-dir", "a_file"], "a_file"),
    "out_is_a_folder": ([*EVALUATE, "--out", "a_folder"], "--out"),
    "out_below_a_file": ([*EVALUATE, "--out", "a_file/m.json"], "a_file"),
    "n_bootstrap_zero": ([*EVALUATE, "--n-bootstrap", "0"], "--n-bootstrap"),
    "n_bootstrap_huge": ([*EVALUATE, "--n-bootstrap", "1000000000"], "--n-bootstrap"),
    "seed_negative": ([*EVALUATE, "--seed", "-1"], "--seed"),
}


@pytest.mark.parametrize("case", CASES)
def test_bad_option_is_one_line_and_exit_2(
    case: str, make_dataset: MakeDataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _prepare(tmp_path, make_dataset)
    args, expected = CASES[case]
    if "--cache-dir" not in args and args[0] == "run":
        args = [*args, "--cache-dir", "cache"]
    result = CliRunner().invoke(app, args)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert expected in lines[0]
    assert "Traceback" not in result.output
    assert not (tmp_path / "results").exists()
    assert (tmp_path / "a_file").read_text() == "not a folder\n"
