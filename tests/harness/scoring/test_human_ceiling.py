"""The human ceiling: each annotator against the leave-one-out consensus of the others, on
the metric code's own terms, and the "human" row it puts beside the models."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.core.dataset import Item, load_dataset
from harness.scoring.human_ceiling import HUMAN_ROW, human_ceiling


def item(item_id: str, annotations: list[list[str]], **extra: Any) -> Item:
    return Item.model_validate(
        {
            "id": item_id,
            "dialogue": [{"speaker": "A", "text": "hi"}],
            "candidates": ["a", "b", "c", "d"],
            "human_ranking": annotations[0],
            "annotations": annotations,
            **extra,
        }
    )


def test_annotators_who_agree_reach_every_metric() -> None:
    same = ["a", "b", "c", "d"]
    items = [item(f"i{k}", [same, same, same]) for k in range(5)]
    human = human_ceiling(items, n_bootstrap=50)
    assert human is not None and human.n_items == 5 and human.n_repeats == 3
    for name in ("hit@1", "mrr", "ndcg", "kendall_tau_b"):
        assert human.metrics[name].mean == pytest.approx(1.0)
    assert human.tie_rate == 0.0


def test_each_annotator_is_judged_without_their_own_ranking() -> None:
    # Two annotators agree, the third reverses them: the reverser is scored against the two
    # (tau -1), each agreeing one against the consensus of one agreeing and one reversed
    # ranking, whose Borda points tie everywhere and fall to the tie-break (rank-1 votes...).
    forward, backward = ["a", "b", "c", "d"], ["d", "c", "b", "a"]
    items = [item("i0", [forward, forward, backward], annotators=["x", "y", "z"])]
    human = human_ceiling(items, n_bootstrap=20)
    assert human is not None
    tau = human.metrics["kendall_tau_b"]
    assert tau.repeats is not None and tau.repeats[2] == pytest.approx(-1.0)
    # consensus(forward, backward): Borda points all tie; a and d have a first place each,
    # b and c a second place each, so the tie-break (rank-1, rank-2 votes, mean rank, id)
    # gives a, d, b, c. Against it, forward is concordant on 4 of 6 pairs: tau = 1/3.
    assert tau.repeats[0] == tau.repeats[1] == pytest.approx(1 / 3, abs=1e-6)


def test_items_with_fewer_than_two_annotations_are_left_out() -> None:
    one = item("solo", [["a", "b", "c", "d"]])
    plain = Item.model_validate(
        {
            "id": "p",
            "dialogue": [{"speaker": "A", "text": "x"}],
            "candidates": ["a", "b"],
            "human_ranking": ["a", "b"],
        }
    )
    assert human_ceiling([one, plain]) is None
    two = item("pair", [["a", "b", "c", "d"], ["b", "a", "c", "d"]])
    human = human_ceiling([one, two], n_bootstrap=20)
    assert human is not None and human.n_items == 1


def test_annotators_seen_on_some_items_only() -> None:
    agree = ["a", "b", "c", "d"]
    items = [
        item("i0", [agree, agree], annotators=["x", "y"]),
        item("i1", [agree, ["d", "c", "b", "a"]], annotators=["x", "z"]),
    ]
    human = human_ceiling(items, n_bootstrap=20)
    assert human is not None and human.n_repeats == 3  # x, y, z
    hit = human.metrics["hit@1"]
    assert hit.repeats == pytest.approx([0.5, 1.0, 0.0])  # x: 1 on i0, 0 on i1


def test_the_sample_annotations_keep_the_authors_ranking_as_consensus() -> None:
    from harness.scoring.consensus import consensus

    dataset = load_dataset("data/sample", check_audio=False)
    for sample in dataset.items:
        assert sample.annotations is not None and len(sample.annotations) == 3
        assert tuple(consensus(sample.annotations, sample.candidates)) == sample.human_ranking
    check = [sys.executable, "data/sample/make_annotations.py", "--check"]
    assert subprocess.run(check, capture_output=True).returncode == 0
    human = human_ceiling(dataset.items, n_bootstrap=100)
    assert human is not None and human.n_items == 26
    assert 0 < human.metrics["kendall_tau_b"].mean < 1  # illustrative disagreement


def test_a_run_report_and_a_sweep_comparison_show_the_human_row(
    tmp_path: Path, tiny_dataset: Path
) -> None:
    from typer.testing import CliRunner

    from harness.cli.main import app

    rows = [json.loads(line) for line in (tiny_dataset / "items.jsonl").open()]
    for row in rows:
        ranking = row["human_ranking"]
        row["annotations"] = [ranking, ranking[::-1], ranking]
    (tiny_dataset / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    experiment = tmp_path / "sweep.yaml"
    experiment.write_text(
        f"name: sweep\ndataset: {tiny_dataset}\nn_bootstrap: 20\n"
        "providers:\n  - {name: random, model: uniform}\n  - {name: random, model: other}\n"
    )
    results = tmp_path / "results"
    args = ["run", str(experiment), "--results-dir", str(results), "--no-progress"]
    ran = CliRunner().invoke(app, [*args, "--cache-dir", str(tmp_path / "cache")])
    assert ran.exit_code == 0, ran.output
    assert "human" in ran.output
    sweep = results / "sweep"
    assert f"| {HUMAN_ROW} |" in (sweep / "comparison.md").read_text()
    (run_dir,) = [p for p in sweep.iterdir() if p.name.startswith("random_uniform")]
    assert f"| {HUMAN_ROW} |" in (run_dir / "report.md").read_text()
    assert "human" not in json.loads((run_dir / "metrics.json").read_text())
    reported = CliRunner().invoke(app, ["report", str(sweep), "--no-html"])
    assert reported.exit_code == 0, reported.output
    assert f"| {HUMAN_ROW} |" in (sweep / "comparison.md").read_text()
    assert HUMAN_ROW in (sweep / "comparison.csv").read_text()
