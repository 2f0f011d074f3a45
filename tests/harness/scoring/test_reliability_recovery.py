"""The judge-reliability block recovers the biases of a judge that has them by construction
(the `simulated` provider's answers, `providers.simulated.Biases`): on 100 seeds of a synthetic
set (items of four candidates, three annotators who copy the true ranking with probability
KAPPA and rank at random otherwise), each figure's 95% CI holds the value the judge's
parameters imply in at least 95 of them. The judge is shown each item in the four orders of a
Latin square, three times each, as experiments/real_judges.yaml shows the real judge.

With position bias b, noise v, N candidates, c = (1 - b)(1 - v) (the share of answers that are
the judge's own ranking) and u = (1 - b) v / N (each candidate's share of the random answers'
top picks), the values implied are (the orders of a Latin square put a different candidate
first in each, and each candidate first once):

- top pick at position 1: b + (1 - b) / N; at any other position (1 - b) / N;
- same top pick in two different orders: c^2 + 2bc/N + 2bu + 2cu + N u^2;
- top pick changes between two answers in the same order: 1 - (b^2 + c^2 + N u^2 + 2bc/N + 2bu
  + 2cu);
- tau-b between answers in the same order: b^2 + c^2; in different orders: c^2 + b^2 t, t the
  mean tau-b between two different rows of a square of rotations (-1/9 for N = 4); the cross
  terms vanish over items, whose squares' base orders are random;
- alpha of the judge with an annotator (no position bias, no noise): a kappa (agreement a);
  among annotators kappa^2: a pair of rankings agrees beyond chance only where both copy;
- parse failures: the malformed share; ties: the tied share of the parsed answers.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from harness.calls.prompting.joint import latin_square
from harness.core.dataset import Item
from harness.core.records import Record
from harness.scoring.reliability import judge_reliability
from providers.simulated import Biases

N, ITEMS, SQUARE_REPEATS, KAPPA, SEEDS = 4, 40, 3, 0.7, 100
REPEATS = N * SQUARE_REPEATS


def synthetic_items(seed: int) -> list[Item]:
    rng = random.Random(f"items:{seed}")
    items = []
    for i in range(ITEMS):
        candidates = [f"c{i}_{k}" for k in range(N)]
        truth = rng.sample(candidates, N)
        annotations = [
            truth if rng.random() < KAPPA else rng.sample(candidates, N) for _ in range(3)
        ]
        items.append(
            Item.model_validate(
                {
                    "id": f"d{i}",
                    "dialogue": [{"speaker": "A", "text": f"dialogue {i}"}],
                    "candidates": candidates,
                    "human_ranking": truth,
                    "annotations": annotations,
                }
            )
        )
    return items


def judged(biases: Biases, items: list[Item], seed: int) -> dict[str, Any]:
    """The block of the judge's answers to each item in the rows of one Latin square (the
    orders of `prompt_options: {order: permuted, squares: 1}`), each row SQUARE_REPEATS times."""
    records = []
    means = {}
    for item in items:
        rows = latin_square(item.candidates, seed=seed, item_id=item.id, block=0)
        total = np.zeros(N)
        for repeat in range(REPEATS):
            shown = rows[repeat % N]
            scores = biases.answer(item.id, item.human_ranking or (), shown, repeat)
            if scores is not None:
                total += [scores[cid] for cid in item.candidates]
            records.append(
                Record(
                    item_id=item.id,
                    candidates=shown,
                    repeat=repeat,
                    scores=dict.fromkeys(shown) if scores is None else dict(scores),
                    parse_error="not_json: no JSON object" if scores is None else None,
                )
            )
        means[item.id] = total / REPEATS  # the judge's ranking (malformed answers count 0)
    return judge_reliability(items, records, means, sampled=True, n_bootstrap=1000, seed=seed)


def rotation_tau(n: int) -> float:
    """Mean tau-b between two different rotations of one order (of distinct rows)."""
    from scipy.stats import kendalltau

    base = list(range(n))
    taus = [kendalltau(base, base[d:] + base[:d]).statistic for d in range(1, n)]
    return float(np.mean(taus))


@dataclass(frozen=True)
class Case:
    biases: Callable[[int], Biases]
    expected: dict[str, tuple[tuple[str, ...], float]]  # figure -> (path in the block, value)


def implied(b: float, v: float) -> dict[str, tuple[tuple[str, ...], float]]:
    c, u = (1 - b) * (1 - v), (1 - b) * v / N
    same = b * b + c * c + N * u * u + 2 * b * c / N + 2 * b * u + 2 * c * u
    fairness = ("preference_fairness", "top1_rate")
    return {
        "position 1": ((*fairness, "0"), b + (1 - b) / N),
        "position 3": ((*fairness, "2"), (1 - b) / N),
        "top pick across orders": (
            ("position_consistency", "top_pick"),
            c * c + 2 * b * c / N + 2 * b * u + 2 * c * u + N * u * u,
        ),
        "tau-b across orders": (("position_consistency", "tau_b"), c * c + b * b * rotation_tau(N)),
        "tau-b across repeats": (("repetition_stability", "tau_b"), b * b + c * c),
        "top pick change": (("repetition_stability", "top_pick_change"), 1 - same),
    }


CASES = {
    "position bias and noise": Case(
        lambda seed: Biases(position_bias=0.3, noise=0.2, agreement=0.5, seed=seed),
        implied(0.3, 0.2),
    ),
    "noise alone": Case(lambda seed: Biases(noise=0.4, seed=seed), implied(0.0, 0.4)),
    "human agreement": Case(
        lambda seed: Biases(agreement=0.6, seed=seed),
        {
            "alpha judge": (("human_agreement", "alpha"), 0.6 * KAPPA),
            "alpha among annotators": (("human_agreement", "alpha_human"), KAPPA**2),
        },
    ),
    "parse failures and ties": Case(
        lambda seed: Biases(position_bias=0.2, malformed=0.1, ties=0.15, seed=seed),
        {
            "parse failures": (("rates", "parse_failure"), 0.1),
            "ties": (("rates", "tie"), 0.15),
        },
    ),
}


def _figure(block: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    found: Any = block
    for key in path:
        found = found[int(key)] if isinstance(found, list) else found[key]
    return dict(found)


def coverage(spec: Case) -> dict[str, int]:
    """In how many of the seeds each figure's CI holds the value the parameters imply."""
    held = dict.fromkeys(spec.expected, 0)
    for seed in range(SEEDS):
        block = judged(spec.biases(seed), synthetic_items(seed), seed)
        for name, (path, value) in spec.expected.items():
            low, high = _figure(block, path)["ci95"]
            held[name] += low <= value <= high
    return held


def test_each_figure_recovers_its_parameter_within_its_ci() -> None:
    """Every figure's CI holds its implied value in 95% of all the seeds of all the figures,
    and each figure's in at least 90 of its 100. (A calibrated 95% interval holds it in a
    Binomial(100, 0.95) number of seeds: fewer than 95 in 44% of sets of seeds, fewer than 90
    in 1%; demanding 95 of each figure would demand intervals wider than 95%.)"""
    held = {
        f"{case}: {name}": n for case, spec in CASES.items() for name, n in coverage(spec).items()
    }
    assert {name: n for name, n in held.items() if n < 90} == {}, held
    assert sum(held.values()) >= 0.95 * SEEDS * len(held), held


@pytest.mark.parametrize(("agreement", "rank"), [(1.0, 1.0), (0.0, 4.0)])
def test_the_judges_rank_among_the_annotators(agreement: float, rank: float) -> None:
    """A judge that always gives the true ranking agrees with the annotators (who give it
    with probability KAPPA) better than any of them does: rank 1 of 4; one that ranks at
    random, worse than all: rank 4. In at least 95 of 100 seeds."""
    found = [
        judged(Biases(agreement=agreement, seed=seed), synthetic_items(seed), seed)[
            "human_agreement"
        ]["rank"]
        for seed in range(SEEDS)
    ]
    assert found.count(rank) >= 95, found
