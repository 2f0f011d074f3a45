from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.main import app
from harness.core.errors import HarnessError
from harness.core.records import Record
from harness.reports.analysis import analyse
from harness.reports.loading import load_run
from harness.reports.tables import estimated_cost
from tests.conftest import load_runs, write_tiny_dataset
from tests.harness.reports._runs import pointwise_records, tiny_scores, write_run

runner = CliRunner()


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    return write_tiny_dataset(tmp_path / "data", n_items=12, seconds=0.1)


def test_report_recomputes_the_runners_metrics(tmp_path: Path) -> None:
    data = write_tiny_dataset(tmp_path / "data", n_items=5, seconds=0.1)
    experiment = tmp_path / "sweep.yaml"
    experiment.write_text(
        f"name: sweep\ndataset: {data}\nn_bootstrap: 50\nproviders:\n"
        "  - {name: mock, model: a}\n  - {name: random, model: uniform}\n"
    )
    results = tmp_path / "results"
    args = ["run", str(experiment), "--results-dir", str(results), "--no-progress"]
    ran = runner.invoke(app, [*args, "--cache-dir", str(tmp_path / "cache")])
    assert ran.exit_code == 0, ran.output
    runs = load_runs(sorted(p.parent for p in (results / "sweep").glob("*/metrics.json")))
    assert len(runs) == 2
    for run in runs:
        written = json.loads((run.path / "metrics.json").read_text())
        assert run.aggregate.to_json()["metrics"] == written["metrics"]
        assert run.aggregate.coverage == pytest.approx(written["coverage"])


def test_report_command_writes_tables_plots_and_html(dataset: Path, tmp_path: Path) -> None:
    sweep = tmp_path / "results" / "ablation"
    write_run(sweep / "good", dataset, pointwise_records(tiny_scores(12)))
    bad_scores = tiny_scores(12, reverse=True)
    bad_scores["d0"]["c0_1"] = None  # one unparsable answer
    write_run(
        sweep / "bad",
        dataset,
        pointwise_records(bad_scores),
        stats={"cost": {"usd": 0.0125, "usd_spent": 0.0}},
    )

    result = runner.invoke(app, ["report", str(sweep), "--baseline", str(sweep / "bad")])
    assert result.exit_code == 0, result.output
    for name in ("comparison.md", "comparison.csv", "paired.csv", "agreement.csv"):
        assert (sweep / name).stat().st_size > 0
    for name in ("metrics.png", "agreement.png"):
        assert (sweep / name).read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert (sweep / "report.html").read_text().startswith("<!DOCTYPE html>")
    assert not (sweep / "position_bias.csv").exists()  # no joint runs

    rows = {row["run"]: row for row in _csv(sweep / "comparison.csv")}
    assert float(rows["good"]["hit@1_mean"]) == 1.0
    assert float(rows["good"]["kendall_tau_b_mean"]) == 1.0
    assert float(rows["bad"]["parse_failure_rate"]) == pytest.approx(1 / 48)
    assert float(rows["bad"]["coverage"]) == pytest.approx(47 / 48)
    assert float(rows["bad"]["cost_usd"]) == 0.0125
    assert rows["good"]["cost_usd"] == ""
    markdown = (sweep / "comparison.md").read_text()
    assert "$0.0125" in markdown and "n/a" in markdown

    paired = {row["metric"]: row for row in _csv(sweep / "paired.csv")}
    assert set(paired) == {"hit@1", "mrr", "ndcg", "kendall_tau_b"}
    assert all(row["run"] == "good" and row["baseline"] == "bad" for row in paired.values())
    assert float(paired["hit@1"]["difference"]) == 1.0
    assert float(paired["hit@1"]["p_value"]) == pytest.approx(2 / 2**12)  # exact, 12 items
    # every paired difference is 1: no spread, so any difference is detectable
    assert float(paired["hit@1"]["mdd80"]) == 0.0
    tau_mdd = float(paired["kendall_tau_b"]["mdd80"])
    assert tau_mdd > 0  # (z(0.975) + z(0.8)) sd / sqrt(12) of the tau differences
    assert "MDD 80%" in result.output and "MDD 80%" in (sweep / "report.html").read_text()

    agreement = {row[""]: row for row in _csv(sweep / "agreement.csv")}
    assert float(agreement["human"]["good"]) == 1.0
    assert float(agreement["good"]["human"]) == 1.0
    bad_tau = float(rows["bad"]["kendall_tau_b_mean"])
    assert float(agreement["human"]["bad"]) == pytest.approx(bad_tau, abs=1e-6)
    assert float(agreement["good"]["bad"]) == pytest.approx(bad_tau, abs=1e-6)


def test_identical_runs_compare_to_zero_difference_and_p_one(dataset: Path, tmp_path: Path) -> None:
    run = write_run(tmp_path / "a" / "same", dataset, pointwise_records(tiny_scores(12)))
    copy = tmp_path / "b" / "same"
    shutil.copytree(run, copy)
    out = tmp_path / "out"
    result = runner.invoke(app, ["report", str(run), "--baseline", str(copy), "--out", str(out)])
    assert result.exit_code == 0, result.output
    rows = _csv(out / "paired.csv")
    assert len(rows) == 4
    for row in rows:
        assert row["run"] == "same (a)" and row["baseline"] == "same (b)"  # told apart by folder
        assert float(row["difference"]) == 0.0
        assert float(row["p_value"]) == 1.0


def test_paired_analysis_strictly_better_on_every_item(dataset: Path, tmp_path: Path) -> None:
    scores = tiny_scores(12)
    worse = {item: {c: -s for c, s in row.items() if s is not None} for item, row in scores.items()}
    runs = load_runs(
        [
            write_run(tmp_path / "better", dataset, pointwise_records(scores)),
            write_run(tmp_path / "worse", dataset, pointwise_records(worse)),
        ]
    )
    analysis = analyse(runs, runs[1])
    tau = analysis.paired["better"]["kendall_tau_b"]
    assert tau.difference == pytest.approx(2.0)
    assert tau.ci95 == pytest.approx((2.0, 2.0))
    assert tau.p_value < 0.001


def test_repeats_show_mean_and_std(dataset: Path, tmp_path: Path) -> None:
    records = pointwise_records(tiny_scores(12)) + pointwise_records(
        tiny_scores(12, reverse=True), repeat=1
    )
    write_run(tmp_path / "rep", dataset, records, repeats=2)
    result = runner.invoke(app, ["report", str(tmp_path / "rep"), "--no-html"])
    assert result.exit_code == 0, result.output
    row = _csv(tmp_path / "rep" / "comparison.csv")[0]
    assert row["repeats"] == "2"
    assert float(row["hit@1_std"]) == pytest.approx(2**0.5 / 2)
    assert "±" in (tmp_path / "rep" / "comparison.md").read_text()
    assert not (tmp_path / "rep" / "report.html").exists()


def test_position_bias_of_a_joint_run(dataset: Path, tmp_path: Path) -> None:
    records = []
    for i in range(12):
        order = [f"c{i}_{j}" for j in range(4)][::-1]  # presentation order
        records.append(
            Record(
                item_id=f"d{i}",
                candidates=order,
                raw='{"scores": [9, 1, 1, 1]}',
                scores={cid: 9.0 if k == 0 else 1.0 for k, cid in enumerate(order)},
            )
        )
    run = write_run(tmp_path / "joint", dataset, records, prompt="joint")
    result = runner.invoke(app, ["report", str(run)])
    assert result.exit_code == 0, result.output
    rows = _csv(run / "position_bias.csv")
    assert [float(r["top1_rate"]) for r in rows] == [1.0, 0.0, 0.0, 0.0]
    assert [float(r["human_top1_rate"]) for r in rows] == [0.0, 0.0, 0.0, 1.0]  # c<i>_0 last
    assert float(rows[0]["uniform"]) == 0.25
    assert (run / "position_bias.png").is_file()
    assert "Position bias" in (run / "report.html").read_text()


def test_estimated_cost_reads_run_json() -> None:
    assert estimated_cost({}) is None
    assert estimated_cost({"cost": {"usd": None, "note": "no price for model 'x'"}}) is None
    assert estimated_cost({"cost": {"usd": 0.25, "usd_spent": 0.0}}) == 0.25


def test_missing_dataset_names_the_option(dataset: Path, tmp_path: Path) -> None:
    run = write_run(tmp_path / "r", tmp_path / "gone", pointwise_records(tiny_scores(2)))
    with pytest.raises(HarnessError, match="--dataset"):
        load_run(run)
    assert load_run(run, dataset=dataset).aggregate.n_items == 12


def test_report_errors_are_one_line(tmp_path: Path) -> None:
    empty = runner.invoke(app, ["report", str(tmp_path)])
    assert empty.exit_code == 2
    assert "no finished runs" in empty.output and "Traceback" not in empty.output


def test_several_folders_need_out(dataset: Path, tmp_path: Path) -> None:
    first = write_run(tmp_path / "x", dataset, pointwise_records(tiny_scores(2)))
    second = write_run(tmp_path / "y", dataset, pointwise_records(tiny_scores(2)))
    result = runner.invoke(app, ["report", str(first), str(second)])
    assert result.exit_code == 2
    assert "--out" in result.output


def test_score_expected_reports_and_pairs_the_expected_scores(
    dataset: Path, tmp_path: Path
) -> None:
    # Greedy scores all tie; the expected scores break the ties in the human's order.
    tied = {item: dict.fromkeys(row, 5.0) for item, row in tiny_scores(12).items()}
    records = pointwise_records(tied)
    for record in records:
        (cid,) = record.candidates
        record.extra["expected_score"] = 5.0 - 0.1 * int(cid.split("_")[1])
    sweep = tmp_path / "results" / "sweep"
    write_run(sweep / "judge", dataset, records)
    write_run(sweep / "baseline", dataset, pointwise_records(tied))
    args = ["report", str(sweep), "--baseline", str(sweep / "baseline")]

    greedy = runner.invoke(app, args)
    assert greedy.exit_code == 0, greedy.output
    rows = {row["run"]: row for row in _csv(sweep / "comparison.csv")}
    assert rows["judge"]["score"] == "greedy" and float(rows["judge"]["tie_rate"]) == 1.0

    expected = runner.invoke(app, [*args, "--score", "expected"])
    assert expected.exit_code == 0, expected.output
    rows = {row["run"]: row for row in _csv(sweep / "comparison.csv")}
    assert rows["judge"]["score"] == "expected" and float(rows["judge"]["tie_rate"]) == 0.0
    assert float(rows["judge"]["hit@1_mean"]) == 1.0
    assert rows["baseline"]["score"] == "greedy"  # it has no expected scores
    paired = {row["metric"]: row for row in _csv(sweep / "paired.csv")}
    assert float(paired["hit@1"]["difference"]) == pytest.approx(0.75)  # 1 vs 1/4 by ties
    assert "expected score" in (sweep / "comparison.md").read_text()
    bad = runner.invoke(app, [*args, "--score", "mean"])
    said = " ".join(bad.output.replace("│", " ").split())  # typer's box, unwrapped
    assert bad.exit_code == 2 and "'--score': Value error, 'mean' is not one of 'greedy'," in said
