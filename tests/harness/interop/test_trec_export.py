"""`harness export trec`: the files that trec_eval (pytrec_eval) and ranx read give the
harness's figures for a run without ties, and the run file read back (`harness evaluate`)
gives the run's metrics.json; on a synthetic pool always, on the MusiCRS popularity run (the
published baseline row) when the release is present."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cli.main import app
from harness.config.experiment import ExperimentConfig
from tests.conftest import run_config, write_pool_dataset, write_tiny_dataset

REPO = Path(__file__).resolve().parents[3]
REALDATA = Path(os.environ.get("BGM_JUDGE_REALDATA", REPO.parent / "shared" / "realdata"))
RELEASE = REALDATA / "musicrs" / "musicrs_100_candidates.jsonl"
runner = CliRunner()


def popularity_run(tmp_path: Path, dataset: Path, tie_break: str = "order") -> Path:
    config = ExperimentConfig.model_validate(
        {
            "name": f"popularity-{tie_break}",
            "dataset": str(dataset),
            "provider": {"name": "popularity", "tie_break": tie_break},
            "inputs": {"dialogue": "query", "music": "caption"},
            "metrics": {"at": [1, 5, 10, 20]},
            "n_bootstrap": 50,
        }
    )
    result, _ = run_config(config, tmp_path)
    return result.out_dir


def export(run: Path, out: Path) -> tuple[Path, Path]:
    result = runner.invoke(app, ["export", "trec", str(run), "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out / "run.trec", out / "qrels.txt"


def parse(run_file: Path, qrels_file: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    run: dict[str, dict[str, float]] = {}
    for line in run_file.read_text().splitlines():
        qid, _, doc, _, score, _ = line.split()
        run.setdefault(qid, {})[doc] = float(score)
    qrels: dict[str, dict[str, int]] = {}
    for line in qrels_file.read_text().splitlines():
        qid, _, doc, gain = line.split()
        qrels.setdefault(qid, {})[doc] = int(gain)
    return run, qrels


def check_against_trec_eval(run_dir: Path, out: Path) -> dict[str, Any]:
    import pytrec_eval

    metrics = json.loads((run_dir / "metrics.json").read_text())
    # no tie between candidates of different gain: where the figures must agree
    assert metrics["tie_rate_ranking"] == 0.0
    run, qrels = parse(*export(run_dir, out))
    measures = {"ndcg_cut.20", "recall.20", "P.1", "recip_rank", "success.5"}
    per_query = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    assert len(per_query) == metrics["n_items"]  # items without gold are queries scoring 0
    # one gain level (gold or not): Hit@1, MRR and hit@K agree too
    pairs = [("ndcg@20", "ndcg_cut_20"), ("recall@20", "recall_20"), ("hit@1", "P_1")]
    for ours, theirs in [*pairs, ("mrr", "recip_rank"), ("hit@5", "success_5")]:
        mean = sum(q[theirs] for q in per_query.values()) / len(per_query)
        assert mean == pytest.approx(metrics["metrics"][ours]["mean"], abs=1e-6), ours
    return metrics


def check_read_back(run_dir: Path, out: Path, dataset: Path) -> None:
    metrics = json.loads((run_dir / "metrics.json").read_text())
    args = ["evaluate", "--dataset", str(dataset), "--predictions", str(out / "run.trec")]
    options = ["--at", "1,5,10,20", "--n-bootstrap", "50", "--out", str(out / "m.json")]
    result = runner.invoke(app, [*args, *options])
    assert result.exit_code == 0, result.output
    read_back = json.loads((out / "m.json").read_text())
    assert read_back["metrics"] == metrics["metrics"]
    assert read_back["groups"] == metrics["groups"]


def test_a_pool_run_exported_matches_trec_eval_and_reads_back(tmp_path: Path) -> None:
    pool = write_pool_dataset(tmp_path / "pool", 8, 40)
    run_dir = popularity_run(tmp_path, pool)
    check_against_trec_eval(run_dir, tmp_path / "trec")
    check_read_back(run_dir, tmp_path / "trec", pool)
    readme = (tmp_path / "trec" / "README.md").read_text()
    assert "tie-aware" in readme and "`tie_rate_ranking` of metrics.json: 0.0000" in readme


def test_ties_are_broken_by_candidate_order_and_said_so(tmp_path: Path) -> None:
    pool = write_pool_dataset(tmp_path / "pool", 4, 30)
    run_dir = popularity_run(tmp_path, pool, "none")  # shared counts tie
    run_file, _ = export(run_dir, tmp_path / "trec")
    lines = [line.split() for line in run_file.read_text().splitlines()]
    first = [row for row in lines if row[0] == "q0"]
    assert [int(r[3]) for r in first] == list(range(1, 31))
    assert [float(r[4]) for r in first] == [float(30 - i) for i in range(30)]  # never equal
    records = [json.loads(x) for x in (run_dir / "records.jsonl").read_text().splitlines()]
    scores = next(r["scores"] for r in records if r["item_id"] == "q0")
    candidates = next(r["candidates"] for r in records if r["item_id"] == "q0")
    expected = sorted(candidates, key=lambda c: (-scores[c], candidates.index(c)))
    assert [r[2] for r in first] == expected
    readme = (tmp_path / "trec" / "README.md").read_text()
    metrics = json.loads((run_dir / "metrics.json").read_text())
    ranking, top = metrics["tie_rate_ranking"], metrics["tie_rate"]
    assert ranking > 0 and f"`tie_rate_ranking` of metrics.json: {ranking:.4f}" in readme
    assert f"`tie_rate`:\n  {top:.4f}" in readme


@pytest.mark.slow  # ranx compiles its metrics with numba on first use (~30 s)
def test_ranx_reads_the_exported_files(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ranx = pytest.importorskip("ranx")
    pool = write_pool_dataset(tmp_path / "pool", 8, 40)
    run_dir = popularity_run(tmp_path, pool)
    run_file, qrels_file = export(run_dir, tmp_path / "trec")
    metrics = json.loads((run_dir / "metrics.json").read_text())["metrics"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        qrels = ranx.Qrels.from_file(str(qrels_file), kind="trec")
        run = ranx.Run.from_file(str(run_file), kind="trec")
        figures = ranx.evaluate(qrels, run, ["ndcg@20", "recall@20"], make_comparable=True)
    assert figures["ndcg@20"] == pytest.approx(metrics["ndcg@20"]["mean"], abs=1e-6)
    assert figures["recall@20"] == pytest.approx(metrics["recall@20"]["mean"], abs=1e-6)


@pytest.mark.slow
@pytest.mark.skipif(not RELEASE.is_file(), reason=f"MusiCRS release not found at {RELEASE}")
def test_the_musicrs_popularity_run_through_trec_eval_and_ranx(tmp_path: Path) -> None:
    from harness.interop.musicrs import import_musicrs

    import_musicrs(RELEASE, tmp_path / "musicrs")
    run_dir = popularity_run(tmp_path, tmp_path / "musicrs")
    metrics = check_against_trec_eval(run_dir, tmp_path / "trec")
    percent = {k: round(100 * metrics["metrics"][k]["mean"], 2) for k in ("recall@20", "ndcg@20")}
    assert percent == {"recall@20": 16.51, "ndcg@20": 11.09}  # MusiCRS's published row
    check_read_back(run_dir, tmp_path / "trec", tmp_path / "musicrs")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ranx = pytest.importorskip("ranx")
        qrels = ranx.Qrels.from_file(str(tmp_path / "trec" / "qrels.txt"), kind="trec")
        run = ranx.Run.from_file(str(tmp_path / "trec" / "run.trec"), kind="trec")
        figures = ranx.evaluate(qrels, run, ["ndcg@20", "recall@20"], make_comparable=True)
    assert figures["ndcg@20"] == pytest.approx(metrics["metrics"]["ndcg@20"]["mean"], abs=1e-6)
    assert figures["recall@20"] == pytest.approx(metrics["metrics"]["recall@20"]["mean"], abs=1e-6)


def test_ids_with_whitespace_are_refused_not_written_unreadable(tmp_path: Path) -> None:
    """Issue 48: a TREC line is split at whitespace, so an id holding some wrote lines the
    harness (and trec_eval) then could not read back."""
    pool = write_pool_dataset(tmp_path / "pool", 3, 6)
    items = [json.loads(line) for line in (pool / "items.jsonl").read_text().splitlines()]
    items[1]["id"] = "item two"
    (pool / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    run = popularity_run(tmp_path, pool)
    result = runner.invoke(app, ["export", "trec", str(run), "--out", str(tmp_path / "trec")])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert "'item two'" in result.output and "whitespace" in result.output
    assert not (tmp_path / "trec" / "run.trec").exists()


def test_a_report_of_trec_runs_labels_them_by_their_run_tags(tmp_path: Path) -> None:
    """Not `run (trec-order)` / `run (trec-none)` after the files' common name."""
    pool = write_pool_dataset(tmp_path / "pool", 4, 30)
    files = []
    for tie_break in ("order", "none"):
        run_dir = popularity_run(tmp_path / tie_break, pool, tie_break)
        run_file, qrels = export(run_dir, tmp_path / f"trec-{tie_break}")
        files.append(run_file)
    tags = [run_file.read_text().split()[5] for run_file in files]
    assert tags == ["popularity-order", "popularity-none"]
    out = tmp_path / "report"
    args = ["report", *map(str, files), "--qrels", str(qrels), "--out", str(out), "--no-html"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    rows = (out / "comparison.csv").read_text().splitlines()[1:]
    assert [row.split(",")[0] for row in rows] == tags


def test_the_readme_says_which_figures_agree_with_trec_eval_on_graded_gains(
    tmp_path: Path,
) -> None:
    """DialBGM's gains are graded (a human ranking: 3, 2, 1, 0). On a run without ties
    pytrec_eval's ndcg, ndcg_cut, recall and P give the harness's figures; its P_1 and
    recip_rank do not (they count any gain above 0 as relevant, the harness's Hit@1 and MRR
    the best candidate); the README names exactly those."""
    import pytrec_eval

    dataset = write_tiny_dataset(tmp_path / "data", n_items=12, seconds=0.05)
    config = ExperimentConfig.model_validate(
        {
            "name": "graded",
            "dataset": str(dataset),
            "provider": {"name": "random", "seed": 3},
            "inputs": {"music": "caption"},
            "metrics": {"at": [2]},
            "n_bootstrap": 50,
        }
    )
    result, _ = run_config(config, tmp_path)
    metrics = json.loads((result.out_dir / "metrics.json").read_text())
    assert metrics["tie_rate_ranking"] == 0.0
    run, qrels = parse(*export(result.out_dir, tmp_path / "trec"))
    measures = {"ndcg", "ndcg_cut.2", "recall.2", "P.2", "P.1", "recip_rank"}
    per_query = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    tool = {m: sum(q[m] for q in per_query.values()) / len(per_query) for m in per_query["d0"]}
    ours = {name: figure["mean"] for name, figure in metrics["metrics"].items()}
    pairs = {"ndcg": "ndcg", "ndcg@2": "ndcg_cut_2", "recall@2": "recall_2"}
    pairs |= {"precision@2": "P_2", "hit@1": "P_1", "mrr": "recip_rank"}
    agree = {h for h, t in pairs.items() if tool[t] == pytest.approx(ours[h], abs=1e-6)}
    assert agree == {"ndcg", "ndcg@2", "recall@2", "precision@2"}
    readme = (tmp_path / "trec" / "README.md").read_text()
    same, graded = (
        " ".join(paragraph.split())
        for paragraph in readme.split("\n- ")
        if paragraph.startswith(("Same figures", "Graded gains"))
    )
    named = [f"`{h.replace('@2', '@K')}`" in same for h in pairs]
    assert named == [h in agree for h in pairs]
    assert all(f"`{h}` ({pairs[h]})" in graded for h in ("hit@1", "mrr"))
