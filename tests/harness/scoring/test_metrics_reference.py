"""Against trec_eval (pytrec-eval-terrier) and ranx on tie-free scores: 100 to 500 candidates
per item, several gold. trec_eval's nDCG uses its own gain conventions, so it is compared on
binary relevance; ranx (linear gains) also on graded relevance."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from harness.scoring.metrics import ScoreMatrix, aggregate

AT = (1, 5, 10, 20, 100, 1000)


def retrieval_run(
    seed: int, n_items: int = 12, *, graded: bool = False
) -> tuple[ScoreMatrix, dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    """Distinct continuous scores, 1 to 30 relevant candidates per item, as a ScoreMatrix and
    as TREC qrels and run dictionaries."""
    rng = np.random.default_rng(seed)
    ids, scores, gains, qrels, run = [], [], [], {}, {}
    for i in range(n_items):
        n = int(rng.integers(100, 501))
        gain = np.zeros(n)
        gold = rng.choice(n, int(rng.integers(1, 31)), replace=False)
        gain[gold] = rng.integers(1, 4, len(gold)) if graded else 1
        score = rng.permutation(n) + 0.3 * n * (gain > 0)  # distinct, relevant ones higher
        item_id = f"q{i:03d}"  # ranx orders queries by id
        ids.append(item_id)
        scores.append(score.astype(np.float64))
        gains.append(gain)
        qrels[item_id] = {f"d{j}": int(g) for j, g in enumerate(gain)}
        run[item_id] = {f"d{j}": float(s) for j, s in enumerate(score)}
    return ScoreMatrix(ids, scores, gains), qrels, run


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_trec_eval(seed: int) -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    matrix, qrels, run = retrieval_run(seed)
    cutoffs = ",".join(map(str, AT))
    measures = {"recip_rank", f"P.{cutoffs}", f"recall.{cutoffs}", f"ndcg_cut.{cutoffs}"}
    measures.add(f"success.{cutoffs}")
    reference = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    ours = aggregate([matrix], n_bootstrap=10, at=AT).per_item
    names = {"mrr": "recip_rank"}
    for k in AT:
        names |= {
            f"precision@{k}": f"P_{k}",
            f"recall@{k}": f"recall_{k}",
            f"ndcg@{k}": f"ndcg_cut_{k}",
            f"hit@{k}": f"success_{k}",
        }
    for row, item_id in enumerate(matrix.item_ids):
        for ours_name, trec_name in names.items():
            expected = reference[item_id][trec_name]
            assert ours[ours_name][row] == pytest.approx(expected, abs=1e-9), (item_id, ours_name)


@pytest.mark.parametrize("graded", [False, True])
def test_matches_ranx(graded: bool) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ranx = pytest.importorskip("ranx")
        matrix, qrels, run = retrieval_run(3, graded=graded)
        # ranx wants only the relevant documents in its qrels.
        relevant = {q: {d: r for d, r in docs.items() if r > 0} for q, docs in qrels.items()}
        metrics = [f"{m}@{k}" for m in ("precision", "recall", "ndcg") for k in AT]
        if not graded:  # ranx's are about any relevant candidate, ours about the most relevant
            metrics += ["mrr", *(f"hit_rate@{k}" for k in AT)]
        reference = ranx.evaluate(
            ranx.Qrels(relevant), ranx.Run(run), metrics, return_mean=False, make_comparable=True
        )
    ours = aggregate([matrix], n_bootstrap=10, at=AT).per_item
    for name in metrics:
        ours_name = name.replace("hit_rate", "hit")
        expected = np.asarray(reference[name])
        assert ours[ours_name] == pytest.approx(expected, abs=1e-9), name
