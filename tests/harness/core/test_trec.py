"""TREC run and qrels files read and written (harness.core.trec), `harness evaluate` on a run file
with qrels, `harness import qrels`, and `harness report` taking a run file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from harness.cli.main import app
from harness.core.dataset import Item, load_dataset
from harness.core.errors import DatasetError
from harness.core.predictions import read_predictions
from harness.core.trec import is_trec_run, qrels_lines, ranked, read_qrels, run_lines

runner = CliRunner()
ITEM = Item(id="q1", query="rain", candidates=("a", "b", "c", "d"), relevance={"c": 2.0, "a": 1.0})


@given(st.lists(st.sampled_from([None, 0.0, 1.0, 2.5]), min_size=4, max_size=4))
def test_the_order_is_by_score_then_candidate_order_unscored_last(
    scores: list[float | None],
) -> None:
    given_scores = dict(zip(ITEM.candidates, scores, strict=True))
    order = ranked(ITEM, given_scores)
    assert sorted(order) == sorted(ITEM.candidates)
    keys = [
        (given_scores[c] is None, -(given_scores[c] or 0.0), ITEM.candidates.index(c))
        for c in order
    ]
    assert keys == sorted(keys)
    lines = [line.split() for line in run_lines([ITEM], {"q1": given_scores}, "t")]
    assert [float(x[4]) for x in lines] == [4.0, 3.0, 2.0, 1.0]  # distinct: every tool agrees


def test_qrels_carry_every_candidate_with_its_gain() -> None:
    assert list(qrels_lines([ITEM])) == ["q1 0 a 1\n", "q1 0 b 0\n", "q1 0 c 2\n", "q1 0 d 0\n"]


def test_a_run_file_reads_as_predictions_and_bad_lines_are_named(tmp_path: Path) -> None:
    run = tmp_path / "run.txt"
    run.write_text("q1 Q0 c 1 9.5 mine\nq1 Q0 a 2 3 mine\n")
    assert is_trec_run(run)
    assert read_predictions(run, [ITEM]) == {0: {"q1": {"c": 9.5, "a": 3.0}}}
    for text, reason in [
        ("q9 Q0 c 1 9 t\n", "unknown item id 'q9'"),
        ("q1 Q0 z 1 9 t\n", "'z' is not a candidate of q1"),
        ("q1 Q0 c 1 high t\n", "score 'high' is not a number"),
        ("q1 Q0 c 1 9 t\nq1 Q0 c 2 8 t\n", "'c' listed twice"),
        ("q1 Q0 c 1 9 t\nq1 c 9\n", "a TREC run line has 6 fields, not 3"),
    ]:
        run.write_text(text)
        with pytest.raises(DatasetError, match=reason) as error:
            read_predictions(run, [ITEM])
        assert str(error.value).startswith(f"{run}:")
    (tmp_path / "q").write_text("q1 0 a x\n")
    with pytest.raises(DatasetError, match=r"q:1: gain 'x' is not a number"):
        read_qrels(tmp_path / "q")


def write_trec(tmp_path: Path) -> tuple[Path, Path]:
    run = tmp_path / "run.trec"
    run.write_text(
        "q1 Q0 d1 1 3 x\nq1 Q0 d2 2 2 x\nq1 Q0 d3 3 1 x\nq2 Q0 d4 1 2 x\nq2 Q0 d1 2 1 x\n"
    )
    qrels = tmp_path / "qrels"
    qrels.write_text("q1 0 d2 1\nq1 0 d9 1\nq2 0 d4 1\nq2 0 d1 0\n")
    return run, qrels


def test_evaluate_takes_a_run_file_with_qrels(tmp_path: Path) -> None:
    run, qrels = write_trec(tmp_path)
    out = tmp_path / "m.json"
    args = ["evaluate", "--predictions", str(run), "--qrels", str(qrels), "--out", str(out)]
    result = runner.invoke(app, [*args, "--at", "1"])
    assert result.exit_code == 0, result.output
    metrics = json.loads(out.read_text())["metrics"]
    assert metrics["mrr"]["mean"] == pytest.approx((1 / 2 + 1) / 2)
    assert metrics["hit@1"]["mean"] == pytest.approx(0.5)
    both = runner.invoke(app, ["evaluate", "--predictions", str(run)])
    assert both.exit_code == 2 and "give --dataset DIR or --qrels FILE" in both.output


@pytest.mark.slow  # the report's figures (~15 s)
def test_report_takes_a_run_file(tmp_path: Path) -> None:
    run, qrels = write_trec(tmp_path)
    runner.invoke(
        app, ["import", "qrels", str(qrels), "--candidates", str(run), "--out", str(tmp_path / "d")]
    )
    args = ["report", str(run), "--dataset", str(tmp_path / "d"), "--out", str(tmp_path / "r")]
    result = runner.invoke(app, [*args, "--no-html"])
    assert result.exit_code == 0, result.output
    table = (tmp_path / "r" / "comparison.csv").read_text().splitlines()
    header, row = table[0].split(","), table[1].split(",")
    assert row[header.index("path")] == str(run)
    assert float(row[header.index("mrr_mean")]) == pytest.approx(0.75)


@pytest.mark.slow
def test_report_takes_run_files_with_qrels(tmp_path: Path) -> None:
    run, qrels = write_trec(tmp_path)
    other = tmp_path / "other.trec"
    other.write_text(
        "q1 Q0 d2 1 3 y\nq1 Q0 d1 2 2 y\nq1 Q0 d3 3 1 y\nq2 Q0 d4 1 2 y\nq2 Q0 d1 2 1 y\n"
    )
    args = ["report", str(run), str(other), "--qrels", str(qrels), "--out", str(tmp_path / "r")]
    result = runner.invoke(app, [*args, "--no-html"])
    assert result.exit_code == 0, result.output
    table = (tmp_path / "r" / "comparison.csv").read_text().splitlines()
    header = table[0].split(",")
    mrr = {r.split(",")[0]: float(r.split(",")[header.index("mrr_mean")]) for r in table[1:]}
    # each run is named by the run tag in its file (issue 47 #7), not by the file's name
    assert mrr == {"x": pytest.approx(0.75), "y": pytest.approx(1.0)}
    data = load_dataset(tmp_path / "r" / "qrels_dataset", check_audio=False)
    assert [i.candidates for i in data.items] == [("d1", "d2", "d3"), ("d4", "d1")]
    both = runner.invoke(app, [*args, "--dataset", str(tmp_path)])
    assert both.exit_code == 2 and "give --dataset or --qrels, not both" in both.output


def test_bad_exports_and_imports_are_one_line(tmp_path: Path) -> None:
    run, qrels = write_trec(tmp_path)
    (tmp_path / "a_file").write_text("x")
    for args, message in [
        (["export", "trec", str(tmp_path / "nowhere"), "--out", "o"], "no config.yaml"),
        (["export", "parquet", str(tmp_path / "nowhere"), "--out", "o"], "no finished run"),
        (
            [
                "import",
                "qrels",
                str(qrels),
                "--candidates",
                str(run),
                "--out",
                str(tmp_path / "a_file"),
            ],
            "is a file, not a folder",
        ),
        (
            ["import", "qrels", str(tmp_path / "none"), "--candidates", str(run), "--out", "o"],
            "qrels file not found",
        ),
    ]:
        result = runner.invoke(app, args)
        assert result.exit_code == 2 and message in result.output, (args, result.output)
        assert len(result.output.strip().splitlines()) == 1
    run.write_text("q1 Q0 d1 1 3 x\n")
    one = runner.invoke(app, ["evaluate", "--qrels", str(qrels), "--predictions", str(run)])
    assert one.exit_code == 2 and "queries ranking fewer than 2 documents: ['q1']" in one.output
