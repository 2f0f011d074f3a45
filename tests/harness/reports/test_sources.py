"""What `harness report` compares: run folders, sweeps at any depth in the experiment's
order, and your own predictions (a file or a folder holding only predictions.jsonl), with
every unreadable path named in a warning."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.main import app
from harness.reports.sources import discover, load_sources
from harness.scoring import registry
from tests.conftest import write_tiny_dataset
from tests.harness.reports._runs import pointwise_records, tiny_scores, write_run

runner = CliRunner()


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def write_predictions(path: Path, scores: dict[str, dict[str, float | None]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"item_id": item, "scores": row}) for item, row in scores.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    return write_tiny_dataset(tmp_path / "data", n_items=12, seconds=0.1)


def test_predictions_are_runs_in_every_report(dataset: Path, tmp_path: Path) -> None:
    quickstart = tmp_path / "results" / "quickstart"
    write_run(quickstart / "good", dataset, pointwise_records(tiny_scores(12)))
    mine = write_predictions(
        tmp_path / "my_model" / "predictions.jsonl", tiny_scores(12, reverse=True)
    )
    loose = write_predictions(tmp_path / "other.jsonl", tiny_scores(12))
    out = tmp_path / "report"
    args = ["report", str(quickstart), str(mine.parent), str(loose), "--out", str(out)]
    result = runner.invoke(app, [*args, "--baseline", str(mine)])
    assert result.exit_code == 0, result.output
    rows = {row["run"]: row for row in _csv(out / "comparison.csv")}
    assert list(rows) == ["good", "my_model", "other"]  # a run folder names the dataset
    assert (
        float(rows["my_model"]["hit@1_mean"]) == 0.0 and float(rows["other"]["hit@1_mean"]) == 1.0
    )
    assert rows["my_model"]["provider"] == "predictions" and rows["my_model"]["prompt"] == "n/a"
    paired = _csv(out / "paired.csv")
    assert {row["run"] for row in paired} == {"good", "other"}
    assert {row["baseline"] for row in paired} == {"my_model"}
    agreement = {row[""]: row for row in _csv(out / "agreement.csv")}
    assert float(agreement["human"]["my_model"]) == -1.0
    html = (out / "report.html").read_text()
    assert '"label":"my_model"' in html and '"label":"other"' in html  # in the dialogue browser


def test_a_predictions_file_alone_needs_a_dataset(dataset: Path, tmp_path: Path) -> None:
    mine = write_predictions(tmp_path / "mine" / "predictions.jsonl", tiny_scores(12))
    without = runner.invoke(app, ["report", str(mine)])
    assert without.exit_code == 2
    assert "needs --dataset DIR (no run folder names one)" in without.stderr
    given = runner.invoke(app, ["report", str(mine), "--dataset", str(dataset)])
    assert given.exit_code == 0, given.output
    assert (tmp_path / "mine" / "comparison.md").is_file()  # next to the file


def test_what_cannot_be_read_is_named_never_skipped_silently(dataset: Path, tmp_path: Path) -> None:
    results = tmp_path / "results"
    write_run(results / "ok", dataset, pointwise_records(tiny_scores(12)))
    write_run(results / "gone", tmp_path / "missing-dataset", pointwise_records(tiny_scores(12)))
    (results / "killed").mkdir()
    (results / "killed" / "records.partial.jsonl").write_text("{}\n")
    bad = write_predictions(results / "bad" / "predictions.jsonl", {"d0": {"c0_0": 1.0}})
    bad.write_text(bad.read_text() + "not json\n")
    (tmp_path / "notes.txt").write_text("hello")
    args = [str(results), str(tmp_path / "notes.txt"), str(tmp_path / "nowhere")]
    result = runner.invoke(app, ["report", *args, "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    warnings = " ".join(result.stderr.split())
    assert "killed: skipped, an unfinished run (interrupted)" in warnings
    assert "gone: dataset folder" in warnings and "--dataset DIR" in warnings
    assert "predictions.jsonl:2:" in warnings
    assert "notes.txt: skipped, not a run folder" in warnings
    assert "nowhere: not found" in warnings
    assert [row["run"] for row in _csv(tmp_path / "out" / "comparison.csv")] == ["ok"]
    assert "warning: " in (tmp_path / "out" / "report.html").read_text()
    empty = runner.invoke(app, ["report", str(tmp_path / "nowhere")])
    assert empty.exit_code == 2 and "no finished runs" in empty.stderr


def test_nested_sweeps_are_found_in_the_experiments_order(dataset: Path, tmp_path: Path) -> None:
    experiment = tmp_path / "table.yaml"
    experiment.write_text(
        f"name: table\ndataset: {dataset}\nn_bootstrap: 20\nproviders:\n"
        "  - {name: random}\n  - {name: mock, model: zz}\n  - {name: mock, model: aa}\n"
    )
    results = tmp_path / "results" / "paper"
    args = ["run", str(experiment), "--results-dir", str(results), "--no-progress"]
    assert runner.invoke(app, [*args, "--cache-dir", str(tmp_path / "cache")]).exit_code == 0
    found = discover([tmp_path / "results"])
    names = [source.path.name for source in found.sources]
    assert names == [
        "random_uniform_full_audio",
        "mock_zz_zero_shot_full_audio",
        "mock_aa_zero_shot_full_audio",
    ]
    assert not found.warnings
    runs, warnings = load_sources(found.sources)
    assert not warnings and [run.label for run in runs] == ["random", "zz", "aa"]
    result = runner.invoke(app, ["report", str(tmp_path / "results")])
    assert result.exit_code == 0, result.output
    rows = [row["run"] for row in _csv(tmp_path / "results" / "comparison.csv")]
    assert rows == ["random", "zz", "aa"]


def test_a_shard_is_skipped_with_a_warning_beside_its_merged_run(
    dataset: Path, tmp_path: Path
) -> None:
    """A shard's metrics are a part's: a report over the results folder takes the merged run
    and names the shards it leaves out."""
    results = tmp_path / "results"
    write_run(results / "run", dataset, pointwise_records(tiny_scores(12)))
    shard = results / "run.shard-0-of-2"
    write_run(shard, dataset, pointwise_records(tiny_scores(12)))
    (shard / "shard.json").write_text('{"format": 1, "index": 0, "count": 2}\n')
    found = discover([results])
    assert [source.path.name for source in found.sources] == ["run"]
    assert found.warnings == [f"{shard}: skipped, shard 0/2 of a run (`harness merge` joins them)"]


def _sweep_with_a_failed_run(tmp_path: Path, dataset: Path) -> Path:
    """A real sweep: one run answered, one whose every call failed (coverage 0)."""
    experiment = tmp_path / "mixed.yaml"
    experiment.write_text(
        f"name: mixed\ndataset: {dataset}\nn_bootstrap: 50\nproviders:\n"
        "  - {name: mock, label: works}\n"
        "  - {name: mock, label: broken, answers: {'*': '!permanent'}, max_attempts: 1}\n"
    )
    args = ["run", str(experiment), "--results-dir", str(tmp_path / "results")]
    result = runner.invoke(app, [*args, "--cache-dir", str(tmp_path / "cache"), "--no-progress"])
    assert result.exit_code == 1, result.output  # the broken run's calls failed
    return tmp_path / "results" / "mixed"


@pytest.mark.slow
def test_a_run_without_a_usable_score_shows_no_chance_level_numbers(
    dataset: Path, tmp_path: Path
) -> None:
    """`harness run` says a run with coverage 0 has no metrics; `harness runs`, `harness
    report` and `harness view` (the same sources) say so too, never its Hit@1."""
    sweep = _sweep_with_a_failed_run(tmp_path, dataset)
    found = discover([sweep])
    runs, warnings = load_sources(found.sources)
    assert [run.name for run in runs] == ["mock_works_zero_shot_full_audio"]
    assert any(
        "mock_broken_zero_shot_full_audio: no metrics, every call failed (48 of 48)" in w
        for w in warnings
    ), warnings
    report = runner.invoke(app, ["report", str(sweep), "--out", str(tmp_path / "out")])
    assert report.exit_code == 0, report.output
    assert [row["run"] for row in _csv(tmp_path / "out" / "comparison.csv")] == [
        "mock_works_zero_shot_full_audio"
    ]
    assert "broken" not in report.stdout and "no metrics" in " ".join(report.stderr.split())
    listing = runner.invoke(app, ["runs", str(sweep)], terminal_width=250)
    assert listing.exit_code == 0, listing.output
    (broken,) = [line for line in listing.stdout.splitlines() if "broken" in line]
    cells = [cell.strip() for cell in broken.split("│")[1:-1]]
    n = len(registry.names("ranking"))  # Hit@1, MRR, nDCG, tau-b
    assert cells[3 : 3 + n] == ["no metrics"] + ["-"] * (n - 1)
    assert cells[3 + n : 5 + n] == ["0.0%", "48/48"]
    assert "every call" in listing.stdout and "(48 of 48)" in listing.stdout


def test_a_predictions_file_missing_an_item_agrees_fully_with_itself(
    dataset: Path, tmp_path: Path
) -> None:
    scores = tiny_scores(12)
    del scores["d3"]
    one = write_predictions(tmp_path / "one" / "predictions.jsonl", scores)
    two = write_predictions(tmp_path / "two" / "predictions.jsonl", scores)
    out = tmp_path / "out"
    result = runner.invoke(
        app, ["report", str(one), str(two), "--dataset", str(dataset), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    agreement = {row[""]: row for row in _csv(out / "agreement.csv")}
    assert [agreement["one"]["one"], agreement["one"]["two"], agreement["two"]["two"]] == [
        "1.0",
        "1.0",
        "1.0",
    ]


def test_a_link_to_a_run_is_followed_a_link_to_any_other_folder_is_not(tmp_path: Path) -> None:
    # (a link to / inside the results folder walked the whole file system: report, runs and
    # view hung; a link to its own parent looped until the path was too long)
    results, elsewhere = tmp_path / "results", tmp_path / "elsewhere"
    for run in (results / "sweep" / "a", elsewhere / "b", elsewhere / "tree" / "c"):
        run.mkdir(parents=True)
        (run / "metrics.json").write_text("{}")
    (results / "best").symlink_to(elsewhere / "b")
    (results / "tree").symlink_to(elsewhere / "tree")
    (results / "sweep" / "loop").symlink_to("..")
    found = discover([results])
    assert sorted(source.path.name for source in found.sources) == ["a", "best"]
    assert sorted(found.warnings) == [
        f"{results / 'sweep' / 'loop'}: skipped, a link to a folder that is not a run",
        f"{results / 'tree'}: skipped, a link to a folder that is not a run",
    ]
