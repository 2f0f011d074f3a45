"""`harness import qrels`: a dataset folder from TREC qrels and a candidate list."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from harness.cli.main import app
from harness.core.dataset import load_dataset
from tests.harness.core.test_trec import write_trec

runner = CliRunner()


def test_import_qrels_builds_a_dataset(tmp_path: Path) -> None:
    run, qrels = write_trec(tmp_path)
    queries = tmp_path / "queries.tsv"
    queries.write_text("q1\tsongs for rain\nq2\tsongs for sun\n")
    args = ["import", "qrels", str(qrels), "--candidates", str(run), "--out", str(tmp_path / "d")]
    result = runner.invoke(app, [*args, "--queries", str(queries)])
    assert result.exit_code == 0, result.output
    assert "1 judged relevant documents are not among their query's candidates" in result.output
    data = load_dataset(tmp_path / "d", check_audio=False)
    assert [(i.id, i.query, i.candidates, i.relevant) for i in data.items] == [
        ("q1", "songs for rain", ("d1", "d2", "d3"), ("d2",)),
        ("q2", "songs for sun", ("d4", "d1"), ("d4",)),
    ]
    assert data.clips["d4"].title == "d4"


def test_graded_gains_become_relevance(tmp_path: Path) -> None:
    run, qrels = write_trec(tmp_path)
    qrels.write_text("q1 0 d2 2\nq1 0 d3 1\nq2 0 d4 -1\n")  # -1: judged unjudgeable, not relevant
    args = ["import", "qrels", str(qrels), "--candidates", str(run), "--out", str(tmp_path / "d")]
    assert runner.invoke(app, args).exit_code == 0
    data = load_dataset(tmp_path / "d", check_audio=False)
    assert data.items[0].graded == {"d2": 2.0, "d3": 1.0}
    assert data.items[1].relevant == ()  # no relevant candidate: scores 0 on every metric


def test_an_existing_dataset_is_not_overwritten(tmp_path: Path) -> None:
    """Issue 48: `import qrels --out EXISTING_DATASET` overwrote it."""
    run, qrels = write_trec(tmp_path)
    out = tmp_path / "d"
    args = ["import", "qrels", str(qrels), "--candidates", str(run), "--out", str(out)]
    assert runner.invoke(app, args).exit_code == 0
    (out / "items.jsonl").write_text((out / "items.jsonl").read_text() + "\n")  # a mark
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    again = runner.invoke(app, args)
    assert again.exit_code == 2 and "Traceback" not in again.output
    assert "holds a dataset" in again.output
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
