"""A run folder's config.yaml and run.json are files the harness wrote earlier, read as
untrusted (issue 27, class 1, D6/D7): an alias bomb, a recursive alias, a list, non-UTF-8
bytes, a nesting too deep or a setting of the wrong type is one line naming the file (exit 2)
for a re-run, `harness report`, `harness runs`, `harness view` and `load_run`, never a
traceback or a walk through 10**9 values."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cli.main import app
from harness.core.errors import HarnessError
from harness.fake_api import FakeServer
from harness.reports.loading import load_run
from harness.reports.server import LiveReport
from tests.reliability.conftest import fast_settings, write_experiment

BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}]\n"
    for i in range(8)
)
BAD_CONFIGS: dict[str, bytes] = {
    "alias_bomb": BOMB.encode(),
    "recursive_alias": b"name: soak\nprovider: &p {inner: *p}\n",
    "a_list": b"- 1\n- 2\n",
    "not_utf8": b"name: \xff\xfe soak\n",
    "nested_deep": b"name: " + b"[" * 5000 + b"]" * 5000 + b"\n",
    "limit_a_word": b"name: soak\ndataset: DATASET\nlimit: many\n",
    "metrics_a_number": b"name: soak\ndataset: DATASET\nmetrics: 5\n",
    "repeats_a_list": b"name: soak\ndataset: DATASET\nrepeats: [1]\n",
}
BAD_RUN_JSON: dict[str, bytes] = {
    "nested_deep": b"[" * 100_000 + b"]" * 100_000,
    "not_utf8": b'{"calls": "\xff"}',
    "provenance_a_list": b'{"provenance": [1, 2], "calls": 3}',
    "endpoints_a_string": b'{"provenance": {"endpoints": "x"}}',
}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A finished run folder, its experiment file and its dataset (made once)."""
    from tests.reliability.conftest import write_dataset

    root = tmp_path_factory.mktemp("run")
    dataset = write_dataset(root / "data", 2)
    with FakeServer(fast_settings()) as server:
        experiment = write_experiment(root / "exp.yaml", dataset, server)
        result = CliRunner().invoke(
            app,
            ["run", str(experiment), "--results-dir", str(root / "results"),
             "--cache-dir", str(root / "cache"), "--no-progress"],
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    return root / "results" / "soak", experiment, dataset


def _copy(finished: Path, tmp_path: Path) -> Path:
    run = tmp_path / "results" / "soak"
    shutil.copytree(finished, run)
    return run


def _one_line(result: Any, *names: str) -> str:
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for name in names:
        assert name in lines[0], lines[0]
    return str(lines[0])


def _skipped_then_exit_2(result: Any, name: str) -> None:
    """`harness report` warns for each run it skips (naming the file and why), then stops
    with one error line when nothing is left to report."""
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("error: ") and sum(x.startswith("error: ") for x in lines) == 1
    assert any(name in line for line in lines[:-1]), result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("bad", BAD_CONFIGS)
def test_d6_d7_a_damaged_config_yaml_is_one_line_everywhere(
    bad: str, finished_run: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """D6/D7: plain `yaml.safe_load` expanded bombs and crashed re-runs, `harness report`,
    `harness view` and `load_run` on a run folder's damaged config.yaml."""
    finished, experiment, dataset = finished_run
    run = _copy(finished, tmp_path)
    (run / "config.yaml").write_bytes(BAD_CONFIGS[bad].replace(b"DATASET", str(dataset).encode()))
    started = time.monotonic()
    with pytest.raises(HarnessError, match=r"config\.yaml"):
        load_run(run)
    rerun = CliRunner().invoke(
        app,
        ["run", str(experiment), "--results-dir", str(tmp_path / "results"),
         "--cache-dir", str(tmp_path / "cache"), "--no-progress"],
    )  # fmt: skip
    _one_line(rerun, str(run))
    report = CliRunner().invoke(app, ["report", str(run), "--out", str(tmp_path / "report")])
    _skipped_then_exit_2(report, "config.yaml")
    listed = CliRunner().invoke(app, ["runs", str(tmp_path / "results")])
    assert listed.exit_code in (0, 2) and "Traceback" not in listed.output, listed.output
    assert listed.exception is None or isinstance(listed.exception, SystemExit)
    page = LiveReport([run]).page()  # what `harness view` serves
    assert b"config.yaml" in page.html
    assert time.monotonic() - started < 30


@pytest.mark.slow
@pytest.mark.parametrize("bad", BAD_RUN_JSON)
def test_d6_a_damaged_run_json_is_one_line_not_a_traceback(
    bad: str, finished_run: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """D6: run.json is read back by `harness report`, `harness runs` and `harness view`."""
    finished, _, _ = finished_run
    run = _copy(finished, tmp_path)
    (run / "run.json").write_bytes(BAD_RUN_JSON[bad])
    report = CliRunner().invoke(app, ["report", str(run), "--out", str(tmp_path / "report")])
    if report.exit_code != 0:
        _skipped_then_exit_2(report, "run.json")
    listed = CliRunner().invoke(app, ["runs", str(tmp_path / "results")])
    assert listed.exception is None or isinstance(listed.exception, SystemExit), listed.output
    LiveReport([run]).page()


def test_d7_the_api_load_run_reads_a_damaged_config_yaml_as_one_error(
    finished_run: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """D7: `harness.runs.api.load_run` (the DataFrame of a run) used plain yaml.safe_load."""
    pytest.importorskip("pandas")
    from harness.runs import api

    finished, _, _ = finished_run
    run = _copy(finished, tmp_path)
    (run / "config.yaml").write_bytes(BAD_CONFIGS["recursive_alias"])
    with pytest.raises(HarnessError, match=r"config\.yaml"):
        api.load_run(run)
    (run / "config.yaml").write_bytes(json.dumps({"name": "soak"}).encode())
    (run / "metrics.json").write_bytes(b"[" * 100_000)
    with pytest.raises(HarnessError, match=r"metrics\.json"):
        api.load_run(run)
