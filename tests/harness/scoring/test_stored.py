"""A run's metrics.json reused by the reports only while what it was computed from is
unchanged (`harness.scoring.stored`): the records, the items, the evaluation options, the
harness version and metrics.json itself. The reused run must read exactly as the run
re-evaluated from its records."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from harness.cli.main import app
from harness.config.experiment import ExperimentConfig
from harness.core.records import read_records
from harness.reports.loading import RunData
from harness.scoring.evaluation import evaluate_records
from harness.scoring.stored import INPUTS, stored_metrics, with_stored_intervals
from tests.conftest import load_runs, run_config, run_pool, write_pool_dataset
from tests.harness.protocols.test_refine import config as refine_config
from tests.harness.protocols.test_refine import write_refine_dataset

runner = CliRunner()


def _run(tmp_path: Path, dataset: Path, name: str, provider: dict[str, Any]) -> Path:
    return run_pool(tmp_path, dataset, name, provider, n_bootstrap=40)


@pytest.fixture
def pool(tmp_path: Path) -> Path:
    return write_pool_dataset(tmp_path / "pool", 6, 12)  # two item groups, three golds each


@pytest.fixture
def folder(tmp_path: Path, pool: Path) -> Path:
    return _run(tmp_path, pool, "chance", {"name": "random", "seed": 3})


def _forced(folder: Path, tmp_path: Path) -> RunData:
    """The same run without its fingerprint: re-evaluated from its records."""
    copy = tmp_path / "forced" / folder.name
    shutil.copytree(folder, copy)
    (copy / INPUTS).unlink()
    (run,) = load_runs([copy])
    assert not run.metrics_reused
    return run


def _same(reused: RunData, forced: RunData) -> None:
    assert reused.metrics_json() == forced.metrics_json()
    assert reused.aggregate.item_ids == forced.aggregate.item_ids
    assert reused.aggregate.per_item.keys() == forced.aggregate.per_item.keys()
    for name, values in forced.aggregate.per_item.items():
        np.testing.assert_array_equal(reused.aggregate.per_item[name], values)
    assert reused.scores.keys() == forced.scores.keys()
    for item_id, scores in forced.scores.items():
        np.testing.assert_array_equal(reused.scores[item_id], scores)


def test_run_writes_the_fingerprint_and_the_report_reuses_its_metrics(
    folder: Path, tmp_path: Path
) -> None:
    inputs = json.loads((folder / INPUTS).read_text())
    assert set(inputs) == {
        "harness_version",
        "intervals_version",
        "records_sha256",
        "metrics_sha256",
        "items_sha256",
        "options",
    }
    assert inputs["options"]["n_bootstrap"] == 40
    (run,) = load_runs([folder])
    assert run.metrics_reused
    forced = _forced(folder, tmp_path)
    _same(run, forced)
    written = json.loads((folder / "metrics.json").read_text())
    assert run.metrics_json()["metrics"] == written["metrics"]
    assert run.metrics_json()["groups"] == written["groups"]  # the pool's two groups


def test_changed_records_force_re_evaluation(folder: Path, tmp_path: Path) -> None:
    records = folder / "records.jsonl"
    lines = records.read_text().splitlines(keepends=True)
    first = json.loads(lines[0])
    cid = first["candidates"][0]
    first["scores"][cid] = 1e6  # the first item's first candidate now ranks first
    records.write_text(json.dumps(first) + "\n" + "".join(lines[1:]))
    (run,) = load_runs([folder])
    assert not run.metrics_reused
    written = json.loads((folder / "metrics.json").read_text())
    assert run.metrics_json()["metrics"] != written["metrics"]
    _same(run, _forced(folder, tmp_path))


@pytest.mark.parametrize(
    ("key", "value"),
    [("n_bootstrap", 41), ("seed", 1), ("missing", "exclude"), ("repeats", 3)],
)
def test_changed_options_force_re_evaluation(
    folder: Path, tmp_path: Path, key: str, value: object
) -> None:
    config = yaml.safe_load((folder / "config.yaml").read_text())
    config[key] = value
    (folder / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    (run,) = load_runs([folder])
    assert not run.metrics_reused
    _same(run, _forced(folder, tmp_path))


def test_changed_cut_offs_force_re_evaluation(folder: Path) -> None:
    config = yaml.safe_load((folder / "config.yaml").read_text())
    config["metrics"]["at"] = [3]
    (folder / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    (run,) = load_runs([folder])
    assert not run.metrics_reused
    assert "hit@3" in run.aggregate.metrics and "hit@5" not in run.aggregate.metrics


def test_a_hand_edited_metrics_json_is_not_trusted(folder: Path) -> None:
    path = folder / "metrics.json"
    metrics = json.loads(path.read_text())
    true_ci = metrics["metrics"]["mrr"]["ci95"]
    metrics["metrics"]["mrr"]["ci95"] = [0.0, 1.0]
    path.write_text(json.dumps(metrics, indent=2) + "\n")
    (run,) = load_runs([folder])
    assert not run.metrics_reused
    assert list(run.aggregate.metrics["mrr"].ci95 or ()) == true_ci


def test_a_changed_dataset_forces_re_evaluation(folder: Path, pool: Path) -> None:
    items = [json.loads(line) for line in (pool / "items.jsonl").read_text().splitlines()]
    items[0]["relevant"] = items[0]["candidates"][:1]  # another gold
    (pool / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    (run,) = load_runs([folder])
    assert not run.metrics_reused
    written = json.loads((folder / "metrics.json").read_text())
    assert run.metrics_json()["metrics"] != written["metrics"]


@pytest.mark.parametrize(
    ("field", "earlier"), [("harness_version", "0.0.1"), ("intervals_version", 0)]
)
def test_a_changed_harness_or_intervals_version_forces_re_evaluation(
    folder: Path, field: str, earlier: object
) -> None:
    inputs = json.loads((folder / INPUTS).read_text())
    inputs[field] = earlier
    (folder / INPUTS).write_text(json.dumps(inputs))
    (run,) = load_runs([folder])
    assert not run.metrics_reused


@pytest.mark.parametrize("text", ["", "{", "[]", '{"options": 1}', "\x00\xff"])
def test_an_unreadable_fingerprint_means_re_evaluation(folder: Path, text: str) -> None:
    (folder / INPUTS).write_text(text)
    (run,) = load_runs([folder])
    assert not run.metrics_reused


def test_expected_scores_are_never_taken_from_metrics_json(folder: Path) -> None:
    """--score expected evaluates other scores than metrics.json's: a run without any falls
    back to its greedy ones, which metrics.json holds."""
    (run,) = load_runs([folder], score="expected")
    assert run.score == "greedy" and run.metrics_reused


def test_stored_intervals_need_every_other_figure_to_match(folder: Path, pool: Path) -> None:
    """The stored file is spliced in only where the re-computed means, counts and rates are
    exactly its own; any difference means it is not this evaluation's."""
    (run,) = load_runs([folder])
    options: dict[str, Any] = {
        "repeats": 2,
        "missing": "worst",
        "n_bootstrap": 40,
        "seed": 0,
        "at": (5,),
        "merge_groups": {},
    }
    stored = stored_metrics(folder, run.dataset.items, options)
    assert stored is not None
    records = list(read_records(folder / "records.jsonl"))
    cheap = evaluate_records(run.dataset.items, records, **(options | {"n_bootstrap": 1}))
    spliced = with_stored_intervals(cheap, stored)
    assert spliced is not None
    full = evaluate_records(run.dataset.items, records, **options)
    assert spliced.to_json() == full.to_json()
    other = json.loads(json.dumps(stored))
    other["metrics"]["ndcg"]["mean"] += 1e-6
    assert with_stored_intervals(cheap, other) is None
    other = json.loads(json.dumps(stored))
    other["groups"]["left"]["n_items"] += 1
    assert with_stored_intervals(cheap, other) is None
    other = json.loads(json.dumps(stored))
    del other["metrics"]["hit@5"]
    assert with_stored_intervals(cheap, other) is None


def test_the_reused_report_is_the_re_evaluated_report(tmp_path: Path, pool: Path) -> None:
    runs = [
        _run(tmp_path, pool, "chance", {"name": "random", "seed": 3}),
        _run(tmp_path, pool, "popular", {"name": "popularity"}),
    ]
    forced = tmp_path / "forced" / runs[0].parent.name  # the same title
    shutil.copytree(runs[0].parent, forced)
    for path in forced.glob(f"*/{INPUTS}"):
        path.unlink()
    outputs = {}
    for name, sweep in (("reused", runs[0].parent), ("forced", forced)):
        out = tmp_path / "reports" / name
        args = ["report", str(sweep), "--out", str(out), "--baseline", str(sweep / "chance")]
        result = runner.invoke(app, [*args, "--n-permutations", "200"])
        assert result.exit_code == 0, result.output
        outputs[name] = out
    compared = ["comparison.md", "comparison.csv", "comparison.tex", "agreement.csv"]
    compared += ["paired.csv", "report.html"]
    for name in compared:
        reused = (outputs["reused"] / name).read_text()
        assert reused == (outputs["forced"] / name).read_text().replace(
            str(forced), str(runs[0].parent)
        ), name


def test_a_refine_runs_turns_and_turn_gain_are_reused_as_re_evaluated(tmp_path: Path) -> None:
    dataset = write_refine_dataset(tmp_path / "refine", n_items=6)
    config = refine_config(dataset, {"name": "random", "seed": 2}, refine={"feedback": "aspects"})
    result, _ = run_config(config, tmp_path)
    (run,) = load_runs([result.out_dir])
    assert run.metrics_reused
    assert {"turns", "turn_gain"} <= set(run.protocol)
    forced = _forced(result.out_dir, tmp_path)
    _same(run, forced)
    assert run.protocol == forced.protocol


@pytest.mark.parametrize(
    "settings", [{"limit": 3}, {"repeats": 3, "missing": "exclude"}, {"metrics": {"at": [1, 3]}}]
)
def test_runs_of_other_settings_are_reused_as_re_evaluated(
    tmp_path: Path, pool: Path, settings: dict[str, Any]
) -> None:
    config = ExperimentConfig.model_validate(
        {
            "name": "other",
            "dataset": str(pool),
            "provider": {"name": "random", "seed": 1},
            "inputs": {"dialogue": "query", "music": "caption"},
            "n_bootstrap": 30,
            **settings,
        }
    )
    result, _ = run_config(config, tmp_path)
    (run,) = load_runs([result.out_dir])
    assert run.metrics_reused
    _same(run, _forced(result.out_dir, tmp_path))
