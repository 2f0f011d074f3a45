"""The Music-CRS command a participant types, the Python API with `protocol=`, the sessions
of a local Hugging Face dataset (TalkPlayData's schema), and `harness export trec` read back
by trec_eval."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import pytrec_eval
from typer.testing import CliRunner

import harness
from harness.cli.main import app
from tests.harness.protocols.test_music_crs import prediction, session_row, write


@pytest.fixture
def submission(tmp_path: Path) -> tuple[Path, Path]:
    sessions = tmp_path / "sessions.jsonl"
    sessions.write_text("".join(json.dumps(session_row(i)) + "\n" for i in range(5)))
    rows = [
        prediction(f"s{i}", t, f"g{i}.{t}", (2 * i + t) % 7 or None)
        for i in range(5)
        for t in (1, 2, 3)
    ]
    return sessions, write(tmp_path / "predictions.json", rows)


def invoke(*args: Any) -> Any:
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result


def test_the_participants_command_writes_the_official_keys(
    tmp_path: Path, submission: tuple[Path, Path]
) -> None:
    sessions, predictions = submission
    out = tmp_path / "scores"
    result = invoke("evaluate", predictions, "--protocol", "music-crs", "--dataset", sessions,
                    "--catalog-size", 47071, "--judge-score", 3.5, "--out", out)  # fmt: skip
    metrics = json.loads((out / "metrics.json").read_text())
    names = ["ndcg@1", "ndcg@10", "ndcg@20", "catalog_diversity", "lexical_diversity", "judge"]
    assert list(metrics["metrics"]) == [*names, "composite"]
    assert set(metrics["official"]) == {*names, "composite", "total_catalog_size"} - {"judge"}
    assert "## Turns" in result.stdout and "| nDCG@10 |" in result.stdout
    api = harness.evaluate(sessions, predictions, protocol="music-crs", options={"judge": 3.5})
    assert api.to_json() == {k: v for k, v in metrics.items() if k in api.to_json()}
    # the older spelling of the predictions, and a blind set: no dataset, no nDCG keys
    invoke("evaluate", "--predictions", predictions, "--protocol", "music-crs", "--out", out)
    blind = json.loads((out / "metrics.json").read_text())
    assert set(blind["metrics"]) == {"catalog_diversity", "lexical_diversity"}


def test_official_scores_a_file_the_harness_refuses_and_says_why(
    tmp_path: Path, submission: tuple[Path, Path]
) -> None:
    sessions, predictions = submission
    rows = json.loads(predictions.read_text())
    rows.append(rows[0])  # a second row for session s0, turn 1
    write(predictions, rows)
    refused = CliRunner().invoke(app, ["evaluate", str(predictions), "--protocol", "music-crs",
                                       "--dataset", str(sessions)])  # fmt: skip
    assert refused.exit_code == 2 and "a second row (first: row 0)" in refused.stderr
    assert "official: true scores it as the organisers do" in refused.stderr
    scored = invoke("evaluate", predictions, "--protocol", "music-crs", "--dataset", sessions,
                    "--official", "--out", tmp_path / "o")  # fmt: skip
    assert "warning: row 15 (session s0, turn 1): a second row" in scored.stderr
    assert "the organisers' evaluator uses the first" in scored.stderr


def test_options_of_another_protocol_are_refused(
    tmp_path: Path, submission: tuple[Path, Path]
) -> None:
    sessions, predictions = submission
    result = CliRunner().invoke(app, ["evaluate", str(predictions), "--dataset", str(sessions),
                                      "--protocol", "refine"])  # fmt: skip
    assert result.exit_code == 2 and "--protocol refine" in result.stderr


@pytest.mark.parametrize("form", ["save_to_disk", "parquet"])
def test_sessions_from_a_hugging_face_dataset_of_talkplays_schema(
    tmp_path: Path, submission: tuple[Path, Path], form: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    datasets = pytest.importorskip("datasets")
    monkeypatch.setenv("BGM_JUDGE_DATA", str(tmp_path / "data"))
    sessions, predictions = submission
    rows = [json.loads(line) for line in sessions.read_text().splitlines()]
    table = datasets.Dataset.from_list(rows)
    if form == "parquet":
        source = tmp_path / "test-00000-of-00001.parquet"
        table.to_parquet(str(source))
    else:
        source = tmp_path / "hub"
        datasets.DatasetDict({"test": table}).save_to_disk(str(source))
    columns = "{items: {split: test}}" if form == "save_to_disk" else None
    given = harness.evaluate(source, predictions, protocol="music-crs", columns=columns)
    assert (
        given.to_json() == harness.evaluate(sessions, predictions, protocol="music-crs").to_json()
    )


def test_export_trec_keeps_the_list_order_and_trec_eval_agrees(
    tmp_path: Path, submission: tuple[Path, Path]
) -> None:
    sessions, predictions = submission
    out = tmp_path / "scores"
    invoke("evaluate", predictions, "--protocol", "music-crs", "--dataset", sessions, "--out", out)
    invoke("export", "trec", out, "--out", tmp_path / "trec")
    run: dict[str, dict[str, float]] = {}
    for line in (tmp_path / "trec" / "run.trec").read_text().splitlines():
        query, _, doc, rank, score, _ = line.split()
        run.setdefault(query, {})[doc] = float(score)
        assert float(score) == 21 - int(rank)  # strictly decreasing down each list
    qrels: dict[str, dict[str, int]] = {}
    for line in (tmp_path / "trec" / "qrels.txt").read_text().splitlines():
        query, _, doc, gain = line.split()
        qrels.setdefault(query, {})[doc] = int(gain)
    measured = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.1,10,20"}).evaluate(run)
    official = json.loads((out / "metrics.json").read_text())["official"]
    for k in (1, 10, 20):
        mean = sum(v[f"ndcg_cut_{k}"] for v in measured.values()) / len(measured)
        assert mean == pytest.approx(official[f"ndcg@{k}"], abs=1e-12)
