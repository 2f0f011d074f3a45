"""`tracking:` logs a sweep to W&B (offline mode) and MLflow (its local file store): one
tracker run per harness run, grouped by the sweep, with its metrics, CIs, cost, provenance
and report files; failed and interrupted runs are marked so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cli.main import app
from tests.conftest import write_pool_dataset

pytest.importorskip("wandb")
pytest.importorskip("mlflow")
runner = CliRunner()
pytestmark = pytest.mark.slow  # wandb starts its service process (~5 s a run)


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("WANDB_API_KEY", "WANDB_BASE_URL", "MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_MODE", "offline")


def sweep(tmp_path: Path, dataset: Path, extra: str = "") -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(
        f"name: pool\ndataset: {dataset}\nn_bootstrap: 20\nmetrics: {{at: [5]}}\n"
        "inputs: {dialogue: query, music: caption}\n"
        "providers:\n  - {name: popularity}\n  - {name: random, seed: 7}\n"
        "tracking:\n"
        f"  wandb: {{project: bgm, mode: offline, dir: {tmp_path / 'wb'}}}\n"
        f"  mlflow: {{tracking_uri: {tmp_path / 'mlruns'}}}\n" + extra
    )
    return path


def mlflow_runs(tmp_path: Path, experiment: str = "pool") -> list[Any]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient((tmp_path / "mlruns").resolve().as_uri())
    found = client.get_experiment_by_name(experiment)
    assert found is not None
    return list(client.search_runs([found.experiment_id]))


def test_a_sweep_gives_one_tracker_run_per_run(tmp_path: Path) -> None:
    from tests.support.wandb_offline import offline_runs

    pool = write_pool_dataset(tmp_path / "pool", 5, 12)
    args = ["run", str(sweep(tmp_path, pool)), "--results-dir", str(tmp_path / "results")]
    result = runner.invoke(app, [*args, "--cache-dir", str(tmp_path / "cache"), "--no-progress"])
    assert result.exit_code == 0, result.output
    folders = sorted(p.parent for p in (tmp_path / "results" / "pool").glob("*/metrics.json"))
    assert len(folders) == 2
    metrics = {f.name: json.loads((f / "metrics.json").read_text())["metrics"] for f in folders}

    wandb_runs = offline_runs(tmp_path / "wb")
    assert sorted(r.name for r in wandb_runs) == sorted(metrics)
    for run in wandb_runs:
        assert run.group == "pool" and run.exit_code == 0
        assert run.summary["harness_status"] == "finished"
        ndcg = metrics[run.name]["ndcg"]
        assert run.summary["ndcg"] == ndcg["mean"]
        assert [run.summary["ndcg.ci_low"], run.summary["ndcg.ci_high"]] == ndcg["ci95"]
        assert run.summary["recall@5"] == metrics[run.name]["recall@5"]["mean"]
        assert run.config["provider"]["name"] in ("popularity", "random")
        assert run.config["provenance"]["harness_version"]
        assert {"metrics.json", "report.md", "run.json"} <= set(run.files)

    ml_runs = mlflow_runs(tmp_path)
    assert sorted(r.info.run_name for r in ml_runs) == sorted(metrics)
    for run in ml_runs:
        assert run.info.status == "FINISHED" and run.data.tags["harness.sweep"] == "pool"
        assert run.data.tags["harness.status"] == "finished"
        expected = metrics[run.info.run_name]
        assert run.data.metrics["ndcg"] == expected["ndcg"]["mean"]
        assert run.data.metrics["ndcg.ci_high"] == expected["ndcg"]["ci95"][1]
        assert run.data.metrics["recall_at_5"] == expected["recall@5"]["mean"]
        assert run.data.params["provider.name"] in ("popularity", "random")
        artifacts = Path(run.info.artifact_uri.removeprefix("file://"))
        assert (artifacts / "report.md").is_file() and (artifacts / "provenance.json").is_file()

    # the same sweep again with other tracking settings is not "another configuration"
    again = runner.invoke(
        app,
        [
            "run",
            str(sweep(tmp_path, pool).rename(tmp_path / "again.yaml")),
            "--set",
            "tracking.mlflow.experiment=second",
            "--results-dir",
            str(tmp_path / "results"),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--no-progress",
        ],
    )
    assert again.exit_code == 0, again.output
    assert len(mlflow_runs(tmp_path, "second")) == 2


def test_failed_and_interrupted_runs_are_marked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support.wandb_offline import offline_runs

    pool = write_pool_dataset(tmp_path / "pool", 3, 10)
    (pool / "items.jsonl").write_text("")  # fails when the run loads its dataset
    args = ["run", str(sweep(tmp_path, pool)), "--results-dir", str(tmp_path / "results")]
    result = runner.invoke(app, [*args, "--cache-dir", str(tmp_path / "cache"), "--no-progress"])
    assert result.exit_code == 2 and "no items" in result.output
    (failed,) = offline_runs(tmp_path / "wb")  # the sweep stopped at its first run
    assert failed.exit_code == 1 and failed.summary["harness_status"] == "failed"
    assert "no items" in failed.summary["harness_error"]
    (ml,) = mlflow_runs(tmp_path)
    assert ml.info.status == "FAILED" and ml.data.tags["harness.status"] == "failed"

    write_pool_dataset(tmp_path / "pool", 3, 10)
    import harness.core.event_loop

    def interrupted(coroutine: Any) -> Any:
        coroutine.close()
        raise KeyboardInterrupt  # what Ctrl-C (or SIGTERM) raises inside a run

    monkeypatch.setattr(harness.core.event_loop, "run_coroutine", interrupted)
    result = runner.invoke(app, [*args, "--cache-dir", str(tmp_path / "cache"), "--no-progress"])
    assert result.exit_code == 130
    # offline runs are named by the second they started: the two may share it
    statuses_wb = sorted(
        (r.summary["harness_status"], r.exit_code) for r in offline_runs(tmp_path / "wb")
    )
    assert statuses_wb == [("failed", 1), ("interrupted", 130)]
    statuses = sorted(r.info.status for r in mlflow_runs(tmp_path))
    assert statuses == ["FAILED", "KILLED"]


def test_the_defaults_write_under_results_and_a_cached_rerun_logs_nothing_new(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """The documented block (`wandb: {project, mode: offline}`, `mlflow: {}`) run twice from
    the project's root: no wandb/ or mlruns/ beside the results, one tracker run per run
    (the second, fully cached, logs none), and no 'Symlinked 1 file' warnings."""
    from tests.support.wandb_offline import offline_runs

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("WANDB_SILENT")
    pool = write_pool_dataset(tmp_path / "pool", 5, 12)
    path = sweep(tmp_path, pool)
    text = path.read_text()
    text = text[: text.index("tracking:")] + "tracking:\n  wandb: {project: bgm, mode: offline}\n"
    path.write_text(text + "  mlflow: {}\n")
    shown = ""
    for _ in range(2):
        result = runner.invoke(app, ["run", str(path), "--no-progress"])
        assert result.exit_code == 0, result.output
        shown += result.output + "".join(capfd.readouterr())
    assert sorted(p.name for p in tmp_path.iterdir()) == [".cache", "pool", "results", "sweep.yaml"]
    assert len(offline_runs(tmp_path / "results")) == 2
    assert len(mlflow_runs(tmp_path / "results")) == 2
    assert "Symlinked" not in shown
