"""The judge-reliability block (`harness.scoring.reliability`): its tau-b and alpha figures
equal scipy's and the krippendorff package's on random answers, its top-pick figures a count
done by hand, it does not depend on the order the records come in, and a design that cannot
give a figure says which run would."""

from __future__ import annotations

import random
from itertools import combinations
from typing import Any

import krippendorff
import numpy as np
import pytest
from scipy.stats import kendalltau

from harness.core.dataset import Item
from harness.core.records import Record
from harness.scoring.alpha import ranks
from harness.scoring.reliability import Answers, Pairs, judge_reliability

CANDIDATES = ["a", "b", "c", "d"]


def items(n: int, annotators: int = 3, seed: int = 0) -> list[Item]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        rankings = [rng.sample(CANDIDATES, 4) for _ in range(annotators)]
        out.append(
            Item.model_validate(
                {
                    "id": f"d{i}",
                    "dialogue": [{"speaker": "A", "text": f"hi {i}"}],
                    "candidates": CANDIDATES,
                    "human_ranking": rankings[0],
                    **({"annotations": rankings} if annotators > 1 else {}),
                }
            )
        )
    return out


def joint_records(dataset: list[Item], orders: int, repeats: int, seed: int = 0) -> list[Record]:
    """Each item shown in `orders` different orders (rotations of a random one), each
    `repeats` times; random scores with ties (integers 0-3)."""
    rng = random.Random(seed)
    records = []
    for item in dataset:
        base = rng.sample(CANDIDATES, 4)
        shown = [base[k:] + base[:k] for k in range(orders)]
        for repeat in range(orders * repeats):
            order = shown[repeat % orders]
            scores: dict[str, float | None] = {c: float(rng.randint(0, 3)) for c in order}
            records.append(Record(item_id=item.id, candidates=order, repeat=repeat, scores=scores))
    return records


def block(dataset: list[Item], records: list[Record], sampled: bool = True) -> dict[str, Any]:
    given: dict[tuple[str, str], list[float]] = {}
    for r in records:
        for c, v in r.scores.items():
            if v is not None:
                given.setdefault((r.item_id, c), []).append(v)
    means = {
        item.id: np.array([np.mean(given.get((item.id, c), [np.nan])) for c in item.candidates])
        for item in dataset
    }
    return judge_reliability(dataset, records, means, sampled=sampled, n_bootstrap=200, seed=1)


def by_hand(dataset: list[Item], records: list[Record], same_order: bool) -> tuple[float, float]:
    """(mean over items of the mean tau-b of its pairs, and of the chance their top picks
    agree), pairs of answers in the same (or different) orders; tau-b by scipy."""
    taus, agree = [], []
    for item in dataset:
        mine = [r for r in records if r.item_id == item.id]
        t, a = [], []
        for x, y in combinations(mine, 2):
            if (x.candidates == y.candidates) != same_order:
                continue
            vx = [x.scores[c] for c in CANDIDATES]
            vy = [y.scores[c] for c in CANDIDATES]
            tau = kendalltau(vx, vy).statistic
            t.append(0.0 if np.isnan(tau) else tau)  # all tied: 0, as the metric layer says
            tops_x = {c for c in CANDIDATES if x.scores[c] == max(vx)}
            tops_y = {c for c in CANDIDATES if y.scores[c] == max(vy)}
            a.append(len(tops_x & tops_y) / (len(tops_x) * len(tops_y)))
        if t:
            taus.append(np.mean(t))
            agree.append(np.mean(a))
    return float(np.mean(taus)), float(np.mean(agree))


@pytest.mark.parametrize("seed", range(5))
def test_pair_tau_b_equals_scipys_to_1e_9(seed: int) -> None:
    dataset = items(6, seed=seed)
    records = joint_records(dataset, orders=3, repeats=2, seed=seed)
    found = sorted(np.round(Pairs.of(Answers.of(dataset, records)).tau, 12))
    expected = []
    for item in dataset:
        mine = [r for r in records if r.item_id == item.id]
        for x, y in combinations(mine, 2):
            tau = kendalltau([x.scores[c] for c in CANDIDATES], [y.scores[c] for c in CANDIDATES])
            expected.append(0.0 if np.isnan(tau.statistic) else tau.statistic)
    assert np.allclose(found, sorted(np.round(expected, 12)), atol=1e-9)


@pytest.mark.parametrize("seed", range(5))
def test_order_and_repeat_figures_equal_a_count_by_hand(seed: int) -> None:
    dataset = items(8, seed=seed)
    records = joint_records(dataset, orders=4, repeats=3, seed=seed)
    found = block(dataset, records)
    tau, agree = by_hand(dataset, records, same_order=False)
    assert found["position_consistency"]["tau_b"]["mean"] == pytest.approx(tau, abs=1e-6)
    assert found["position_consistency"]["top_pick"]["mean"] == pytest.approx(agree, abs=1e-6)
    tau, agree = by_hand(dataset, records, same_order=True)
    stability = found["repetition_stability"]
    assert stability["tau_b"]["mean"] == pytest.approx(tau, abs=1e-6)
    assert stability["top_pick_change"]["mean"] == pytest.approx(1 - agree, abs=1e-6)
    low, high = stability["tau_b"]["ci95"]
    assert low <= stability["tau_b"]["mean"] <= high


def test_alpha_is_the_mean_of_the_packages_alpha_with_each_annotator() -> None:
    dataset = items(10, seed=4)
    records = joint_records(dataset, orders=2, repeats=1, seed=4)
    found = block(dataset, records)["human_agreement"]
    means = {
        item.id: np.mean(
            [[r.scores[c] for c in CANDIDATES] for r in records if r.item_id == item.id], axis=0
        )
        for item in dataset
    }
    judge = np.concatenate([ranks(means[item.id]) for item in dataset])
    humans = [
        np.concatenate(
            [[(item.annotations or ())[h].index(c) + 1.0 for c in CANDIDATES] for item in dataset]
        )
        for h in range(3)
    ]
    alpha = lambda x, y: krippendorff.alpha(np.stack([x, y]), level_of_measurement="ordinal")  # noqa: E731
    assert found["alpha"]["mean"] == pytest.approx(
        np.mean([alpha(judge, h) for h in humans]), abs=1e-6
    )
    among = np.mean([alpha(x, y) for x, y in combinations(humans, 2)])
    assert found["alpha_human"]["mean"] == pytest.approx(among, abs=1e-6)
    assert 1 <= found["rank"] <= 4


def test_the_block_does_not_depend_on_the_order_of_the_records() -> None:
    dataset = items(6)
    records = joint_records(dataset, orders=4, repeats=2)
    shuffled = list(records)
    random.Random(9).shuffle(shuffled)
    assert block(dataset, shuffled) == block(dataset, records)


def test_rates_count_failures_refusals_and_ties_per_item() -> None:
    dataset = items(2)
    base = joint_records(dataset, orders=2, repeats=1)
    base[0] = base[0].model_copy(update={"scores": dict.fromkeys(CANDIDATES, 1.0)})  # tied
    blocked = Record(
        item_id="d0",
        candidates=CANDIDATES,
        repeat=2,
        scores=dict.fromkeys(CANDIDATES),
        raw="",
        extra={"blocked": "SAFETY"},
    )
    unparsed = Record(
        item_id="d1",
        candidates=CANDIDATES,
        repeat=2,
        scores=dict.fromkeys(CANDIDATES),
        parse_error="not_json: no JSON object",
    )
    rates = block(dataset, [*base, blocked, unparsed])["rates"]
    assert rates["refusal"]["mean"] == pytest.approx((1 / 3 + 0) / 2, abs=1e-6)
    assert rates["parse_failure"]["mean"] == pytest.approx((0 + 1 / 3) / 2, abs=1e-6)
    assert rates["error"]["mean"] == 0.0
    tied = [list(r.scores.values()).count(max(r.scores.values())) > 1 for r in base]
    assert tied[0]
    assert rates["tie"]["mean"] == pytest.approx(
        (np.mean(tied[:2]) + np.mean(tied[2:])) / 2, abs=1e-6
    )


def pointwise_records(dataset: list[Item], repeats: int) -> list[Record]:
    rng = random.Random(2)
    return [
        Record(item_id=item.id, candidates=[c], repeat=r, scores={c: float(rng.randint(0, 9))})
        for r in range(repeats)
        for item in dataset
        for c in item.candidates
    ]


def test_a_pointwise_greedy_run_says_how_to_measure_order_and_repeats() -> None:
    dataset = items(3)
    found = block(dataset, pointwise_records(dataset, 1), sampled=False)
    missing = found["not_measured"]
    assert missing["position_consistency"]["set"] == [
        "prompt=joint",
        "prompt_options.order=permuted",
        "repeats=4",
    ]
    assert missing["repetition_stability"]["set"] == ["provider.temperature=0.7", "repeats=3"]
    assert "position_consistency" not in found and "repetition_stability" not in found
    assert found["human_agreement"]["alpha"] is not None


def test_a_sampled_pointwise_run_measures_its_repeats() -> None:
    dataset = items(3)
    found = block(dataset, pointwise_records(dataset, 3))
    assert found["repetition_stability"]["tau_b"]["n_items"] == 3
    assert "repetition_stability" not in found["not_measured"]


def test_a_joint_run_in_one_order_and_one_without_repeats_at_an_order() -> None:
    dataset = items(3)
    fixed = block(dataset, joint_records(dataset, orders=1, repeats=3))
    assert fixed["not_measured"]["position_consistency"]["set"] == [
        "prompt_options.order=permuted",
        "repeats=4",
    ]
    assert "repetition_stability" in fixed
    square = block(dataset, joint_records(dataset, orders=4, repeats=1))
    assert square["not_measured"]["repetition_stability"] == {
        "reason": "no order shown twice to an item",
        "set": ["prompt_options.squares=1", "repeats=12"],
    }
    greedy = block(dataset, joint_records(dataset, orders=4, repeats=1), sampled=False)
    assert greedy["not_measured"]["repetition_stability"]["set"][0] == "provider.temperature=0.7"


def test_one_human_ranking_per_item_gives_alpha_without_the_ceiling() -> None:
    dataset = items(5, annotators=1)
    found = block(dataset, joint_records(dataset, orders=2, repeats=1))
    assert found["human_agreement"]["annotators"] == 1
    assert "alpha_human" not in found["human_agreement"]
    assert "annotations" in found["not_measured"]["human_ceiling"]["reason"]
