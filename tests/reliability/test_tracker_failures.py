"""Trackers after a paid run (issue 48): a tracker that cannot be set up is one line before
anything is paid; one that fails when the run is logged (an item group W&B or MLflow cannot
name, a server that answers garbage) is one warning line, and the run's results stay; what a
tracker records (the command line, the settings) is scrubbed of secrets as run.json is."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cli.main import app
from harness.fake_api import FakeServer
from tests.conftest import write_pool_dataset
from tests.reliability.conftest import fast_settings, harness_command

pytest.importorskip("wandb")
pytest.importorskip("mlflow")
pytestmark = pytest.mark.slow  # wandb starts its service process
runner = CliRunner()


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("WANDB_API_KEY", "WANDB_BASE_URL", "MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_MODE", "offline")


def _experiment(tmp_path: Path, dataset: Path, tracking: str, provider: str = "") -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(
        f"name: t\ndataset: {dataset}\nn_bootstrap: 20\n"
        "inputs: {dialogue: query, music: caption}\n"
        f"provider: {provider or '{name: popularity}'}\ntracking:\n{tracking}"
    )
    return path


def _run(tmp_path: Path, experiment: Path, *more: str) -> Any:
    return runner.invoke(
        app,
        ["run", str(experiment), "--results-dir", str(tmp_path / "results"),
         "--cache-dir", str(tmp_path / "cache"), "--no-progress", *more],
    )  # fmt: skip


def _no_traceback(result: Any) -> None:
    assert "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )


def test_a_group_no_tracker_can_name_is_a_warning_and_the_results_stay(tmp_path: Path) -> None:
    pool = write_pool_dataset(tmp_path / "pool", 4, 10)
    items = [json.loads(line) for line in (pool / "items.jsonl").read_text().splitlines()]
    for item in items:
        item["group"] = "a:b|c?" + item["group"]
    (pool / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    tracking = f"  mlflow: {{tracking_uri: {tmp_path / 'mlruns'}}}\n"
    result = _run(tmp_path, _experiment(tmp_path, pool, tracking))
    _no_traceback(result)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "results" / "t" / "metrics.json").is_file()


@pytest.mark.parametrize("case", ["wandb_dir_a_file", "mlflow_uri_a_file", "wandb_project_slash"])
def test_a_tracker_that_cannot_start_is_one_line_before_anything_is_paid(
    tmp_path: Path, case: str
) -> None:
    pool = write_pool_dataset(tmp_path / "pool", 3, 10)
    afile = tmp_path / "a_file"
    afile.write_text("not a folder\n")
    tracking = {
        "wandb_dir_a_file": f"  wandb: {{project: bgm, mode: offline, dir: {afile}}}\n",
        "mlflow_uri_a_file": f"  mlflow: {{tracking_uri: {afile}}}\n",
        "wandb_project_slash": f"  wandb: {{project: a/b, mode: offline, dir: {tmp_path}}}\n",
    }[case]
    result = _run(tmp_path, _experiment(tmp_path, pool, tracking))
    _no_traceback(result)
    assert result.exit_code == 2, result.output
    assert "tracking" in result.output
    assert not (tmp_path / "results" / "t" / "records.jsonl").exists()


@pytest.fixture
def garbage_server() -> Iterator[str]:
    class Garbage(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._reply()

        def do_POST(self) -> None:
            self._reply()

        def _reply(self) -> None:
            body = b"<html>not MLflow</html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Garbage)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.mark.parametrize("where", ["garbage", "down"])
def test_an_mlflow_server_that_answers_garbage_or_is_down_is_one_line_soon(
    tmp_path: Path, garbage_server: str, where: str
) -> None:
    import time

    pool = write_pool_dataset(tmp_path / "pool", 3, 10)
    uri = garbage_server if where == "garbage" else "http://127.0.0.1:9"
    started = time.monotonic()
    result = _run(tmp_path, _experiment(tmp_path, pool, f"  mlflow: {{tracking_uri: {uri}}}\n"))
    _no_traceback(result)
    assert result.exit_code == 2 and "tracking" in result.output, result.output
    assert time.monotonic() - started < 60


def test_a_password_in_a_base_url_never_reaches_the_tracker(tmp_path: Path) -> None:
    pool = write_pool_dataset(tmp_path / "pool", 3, 10)
    tracking = (
        f"  wandb: {{project: bgm, mode: offline, dir: {tmp_path / 'wb'}}}\n"
        f"  mlflow: {{tracking_uri: {tmp_path / 'mlruns'}}}\n"
    )
    with FakeServer(fast_settings()) as server:
        secret_url = server.openai_base_url.replace("http://", "http://user:Pw0rdS3cret@")
        provider = (
            "{name: openai-compatible, model: fake-judge, max_concurrency: 4}\nprompt: listwise"
        )
        experiment = _experiment(tmp_path, pool, tracking, provider)
        # a process of its own: W&B records the command line (sys.argv)
        done = subprocess.run(
            harness_command(
                "run", str(experiment), "--set", f"provider.base_url={secret_url}",
                "--results-dir", str(tmp_path / "results"),
                "--cache-dir", str(tmp_path / "cache"), "--no-progress",
            ),
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    leaked = [
        str(path)
        for folder in (tmp_path / "wb", tmp_path / "mlruns", tmp_path / "results")
        for path in folder.rglob("*")
        if path.is_file() and b"Pw0rdS3cret" in path.read_bytes()
    ]
    assert leaked == []


@pytest.mark.parametrize("group", ["..", "g" * 300, "a/./b"])
def test_a_group_mlflow_cannot_name_as_given_still_gets_every_metric_logged(
    tmp_path: Path, group: str
) -> None:
    """The repeat of issue 48's attacks: a group named `..`, or longer than MLflow's 250
    characters, made MLflow refuse the whole batch: the run's results stayed, but MLflow got
    none of its metrics (one warning line)."""
    from mlflow.tracking import MlflowClient

    pool = write_pool_dataset(tmp_path / "pool", 4, 10)
    items = [json.loads(line) for line in (pool / "items.jsonl").read_text().splitlines()]
    items[0]["group"] = group
    (pool / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    tracking = f"  mlflow: {{tracking_uri: {tmp_path / 'mlruns'}}}\n"
    result = _run(tmp_path, _experiment(tmp_path, pool, tracking))
    _no_traceback(result)
    assert result.exit_code == 0 and "could not log" not in result.output, result.output
    client = MlflowClient((tmp_path / "mlruns").as_uri())
    (run,) = client.search_runs([client.get_experiment_by_name("t").experiment_id])
    assert "hit_at_1" in run.data.metrics and len(run.data.metrics) > 10
