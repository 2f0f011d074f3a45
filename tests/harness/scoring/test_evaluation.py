"""The one evaluation path: rankings as predictions, cut-offs, and the per-group breakdown."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from harness.cli.main import app
from harness.core.dataset import load_dataset
from harness.core.predictions import read_predictions, scores_from_ranking
from harness.scoring.evaluation import evaluate_predictions, mean_scores
from harness.scoring.metrics import ScoreMatrix, aggregate, build_matrix
from tests.conftest import write_pool_dataset

runner = CliRunner()


@given(st.lists(st.integers(0, 30), unique=True, min_size=2, max_size=30), st.data())
def test_a_ranking_orders_its_candidates_above_the_rest_tied(
    candidates: list[int], data: st.DataObject
) -> None:
    names = [f"c{c}" for c in candidates]
    ranking = data.draw(
        st.permutations(names).map(lambda p: p[: data.draw(st.integers(0, len(p)))])
    )
    scores = scores_from_ranking(ranking, names)
    assert set(scores) == set(names)
    listed = [scores[c] for c in ranking]
    assert listed == sorted(listed, reverse=True) and len(set(listed)) == len(listed)
    rest = {scores[c] for c in names if c not in ranking}
    assert len(rest) <= 1 and all(r < min(listed, default=np.inf) for r in rest)


def write(path: Path, lines: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_rankings_evaluate_like_the_scores_they_stand_for(tmp_path: Path) -> None:
    data = load_dataset(write_pool_dataset(tmp_path / "pool", 4, 30), check_audio=False)
    rankings, scores = [], []
    for item in data.items:
        ranked = list(item.candidates[::-1][:12])
        rankings.append({"item_id": item.id, "ranking": ranked})
        given_scores = dict.fromkeys(item.candidates, 0.0) | {
            c: 100.0 - i for i, c in enumerate(ranked)
        }
        scores.append({"item_id": item.id, "scores": given_scores})
    by_ranking = read_predictions(write(tmp_path / "r.jsonl", rankings), data.items)
    by_scores = read_predictions(write(tmp_path / "s.jsonl", scores), data.items)
    first = evaluate_predictions(data.items, by_ranking, at=(1, 5, 20), n_bootstrap=50)
    second = evaluate_predictions(data.items, by_scores, at=(1, 5, 20), n_bootstrap=50)
    assert first.to_json() == second.to_json()
    assert {"recall@20", "ndcg@5", "precision@1", "hit@5"} <= set(first.aggregate.metrics)
    assert first.aggregate.tie_rate == 0.0


def test_groups_are_the_aggregate_of_their_items(tmp_path: Path) -> None:
    data = load_dataset(write_pool_dataset(tmp_path / "pool", 6, 20), check_audio=False)
    rng = np.random.default_rng(0)
    predictions = {
        0: {i.id: {c: float(rng.integers(0, 5)) for c in i.candidates} for i in data.items}
    }
    result = evaluate_predictions(data.items, predictions, at=(5,), n_bootstrap=20)
    assert list(result.groups) == ["left", "right"]
    for name, group in result.groups.items():
        items = [i for i in data.items if i.group == name]
        alone = aggregate([build_matrix(items, predictions[0])], at=(5,), n_bootstrap=20)
        assert group.to_json() == alone.to_json() and group.n_items == 3
    merged = evaluate_predictions(
        data.items, predictions, n_bootstrap=20, merge_groups={"left": "all", "right": "all"}
    )
    assert list(merged.groups) == ["all"]
    assert merged.groups["all"].metrics["mrr"].mean == merged.aggregate.metrics["mrr"].mean
    assert (
        "groups" in merged.to_json()
        and "groups"
        not in evaluate_predictions(
            [i.model_copy(update={"group": None}) for i in data.items], predictions, n_bootstrap=20
        ).to_json()
    )


def test_evaluate_cli_takes_rankings_and_cutoffs(tmp_path: Path) -> None:
    pool = write_pool_dataset(tmp_path / "pool", 3, 25)
    data = load_dataset(pool, check_audio=False)
    preds = write(
        tmp_path / "p.jsonl",
        [{"item_id": item.id, "ranking": list(item.relevant or ())} for item in data.items],
    )
    out = tmp_path / "m.json"
    args = ["evaluate", "--dataset", str(pool), "--predictions", str(preds), "--out", str(out)]
    done = runner.invoke(app, [*args, "--at", "1,3,20"])
    assert done.exit_code == 0, done.output
    metrics = json.loads(out.read_text())
    assert metrics["metrics"]["recall@3"]["mean"] == 1.0  # every gold listed first
    assert metrics["metrics"]["ndcg@20"]["mean"] == 1.0 and "recall@20" in metrics["metrics"]
    assert set(metrics["groups"]) == {"left", "right"}
    assert "R@20" in done.output
    bad = runner.invoke(app, [*args, "--at", "1,x"])
    assert bad.exit_code == 2 and "--at takes cut-offs" in bad.output


def test_a_run_without_a_usable_score_is_told_apart_from_a_poor_one() -> None:
    """The evaluation side decides when a run has no metrics worth a table (coverage 0):
    every call failed, or every answer was unparsable; a run with one usable score has
    metrics, and so has a run that made no call."""
    from harness.scoring.evaluation import no_scores_reason

    assert no_scores_reason({"coverage": 0.0}, {"calls": 4, "errors": 4}) == (
        "every call failed (4 of 4)"
    )
    assert no_scores_reason({"coverage": 0}, {"calls": 4, "errors": 1}) == (
        "no usable score in 4 call(s) (1 failed, the rest unparsable)"
    )
    assert no_scores_reason({"coverage": 0.25}, {"calls": 4, "errors": 3}) is None
    assert no_scores_reason({"coverage": 0.0}, {"calls": 0}) is None


VALUES = st.sampled_from([0.0, 1.0, 2.5, -3.0, float("nan"), float("inf"), -float("inf")])


@given(st.lists(st.integers(1, 5), min_size=0, max_size=6), st.integers(1, 3), st.data())
def test_mean_scores_average_each_candidates_usable_scores_over_repeats(
    widths: list[int], n_repeats: int, data: st.DataObject
) -> None:
    """Per item and candidate: the mean of its finite scores over the repeats, NaN if none
    (an infinite score is not usable)."""
    ids = [f"d{i}" for i in range(len(widths))]
    matrices = [
        ScoreMatrix(
            ids,
            [np.array(data.draw(st.lists(VALUES, min_size=w, max_size=w))) for w in widths],
            [np.zeros(w) for w in widths],
        )
        for _ in range(n_repeats)
    ]
    means = mean_scores(matrices)
    assert list(means) == ids
    for i, item_id in enumerate(ids):
        for c in range(widths[i]):
            usable = [float(m.scores[i][c]) for m in matrices if np.isfinite(m.scores[i][c])]
            expected = sum(usable) / len(usable) if usable else float("nan")
            got = float(means[item_id][c])
            assert (np.isnan(got) and np.isnan(expected)) or got == expected
