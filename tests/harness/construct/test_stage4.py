from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from harness.construct.stage4 import Stage4Config, aggregate, kendall_w, run_stage4
from harness.core.dataset import load_dataset
from harness.core.errors import HarnessError
from harness.scoring.consensus import borda_points, consensus

CANDS = ["a", "b", "c", "d"]


def test_kendall_w_hand_worked() -> None:
    # Ranks given to a, b, c, d by three annotators: (1,2,3,4), (1,3,2,4), (2,1,3,4).
    # Rank sums 4, 6, 8, 12; their mean is m(n+1)/2 = 7.5; S = 3.5² + 1.5² + 0.5² + 4.5² = 35.
    # W = 12 S / (m² (n³ - n)) = 420 / (9 * 60) = 7/9.
    rankings = [["a", "b", "c", "d"], ["a", "c", "b", "d"], ["b", "a", "c", "d"]]
    assert kendall_w(rankings, CANDS) == pytest.approx(7 / 9)


def test_kendall_w_extremes() -> None:
    assert kendall_w([CANDS, CANDS, CANDS], CANDS) == pytest.approx(1.0)
    assert kendall_w([CANDS, CANDS[::-1]], CANDS) == pytest.approx(0.0)
    # Every permutation once: rank sums are all equal.
    assert kendall_w([list(p) for p in itertools.permutations(CANDS)], CANDS) == pytest.approx(0)
    with pytest.raises(ValueError, match="two annotators"):
        kendall_w([CANDS], CANDS)
    with pytest.raises(ValueError, match="not a permutation"):
        kendall_w([CANDS, ["a", "a", "b", "c"]], CANDS)


def test_kendall_w_matches_friedman_relation() -> None:
    # W = chi²_F / (m (n - 1)) where chi²_F is Friedman's statistic (no ties).
    from scipy.stats import friedmanchisquare

    rankings = [
        ["a", "b", "c", "d"],
        ["b", "a", "d", "c"],
        ["a", "c", "b", "d"],
        ["d", "a", "b", "c"],
    ]
    per_candidate = [[r.index(c) + 1 for r in rankings] for c in CANDS]
    chi2 = friedmanchisquare(*per_candidate).statistic
    assert kendall_w(rankings, CANDS) == pytest.approx(chi2 / (4 * 3))


def test_borda_and_plain_consensus() -> None:
    rankings = [["b", "a", "c", "d"], ["b", "c", "a", "d"], ["a", "b", "d", "c"]]
    assert borda_points(rankings, CANDS) == {"a": 6, "b": 8, "c": 3, "d": 1}
    assert consensus(rankings, CANDS) == ["b", "a", "c", "d"]


def test_tie_break_by_rank1_then_rank2_then_id() -> None:
    # a ranks (1, 4) and b ranks (2, 3): 3 points each; a has the rank-1 vote.
    two = [["a", "b", "c", "d"], ["c", "d", "b", "a"]]
    assert borda_points(two, CANDS) == {"a": 3, "b": 3, "c": 4, "d": 2}
    assert consensus(two, CANDS) == ["c", "a", "b", "d"]
    # d ranks (1, 2, 4) and c ranks (3, 1, 3): 5 points and one rank-1 vote each; d has the
    # rank-2 vote.
    three = [["d", "a", "c", "b"], ["c", "d", "a", "b"], ["a", "b", "c", "d"]]
    assert borda_points(three, CANDS) == {"a": 6, "b": 2, "c": 5, "d": 5}
    assert consensus(three, CANDS) == ["a", "d", "c", "b"]
    # Complete symmetry: the candidate id decides.
    assert consensus([["a", "b", "c", "d"], ["b", "a", "d", "c"]], CANDS) == ["a", "b", "c", "d"]


def make_items(ws: list[list[list[str]]]) -> list[dict[str, Any]]:
    return [
        {
            "id": f"d{i:02d}",
            "candidates": CANDS,
            "annotations": rankings,
            "retrieval": {"top1": "a"},
        }
        for i, rankings in enumerate(ws)
    ]


def test_filtering_low_w_and_bottom_share() -> None:
    agree = [CANDS, CANDS, CANDS]  # W = 1
    mostly = [["a", "b", "c", "d"], ["a", "c", "b", "d"], ["b", "a", "c", "d"]]  # W = 7/9
    weak = [["a", "b", "c", "d"], ["b", "a", "d", "c"], ["c", "d", "a", "b"]]
    none = [CANDS, CANDS[::-1]]  # W = 0
    assert kendall_w(weak, CANDS) < 0.25
    items = make_items([agree] * 12 + [mostly] * 6 + [weak, none])
    items.append({"id": "lonely", "candidates": CANDS, "annotations": [CANDS]})
    kept, report = aggregate(items, Stage4Config())
    # 20 annotated: 2 below 0.25; bottom 10% = the same 2 lowest, so nothing more goes.
    assert report["n_annotated"] == 20 and report["n_too_few_annotations"] == 1
    assert report["dropped_w_below_min"] == 2 and report["dropped_bottom_share"] == 0
    assert report["n_kept"] == 18 == len(kept)
    assert report["w_before_filtering"]["share_w_ge_0.5"] == pytest.approx(18 / 20)
    assert report["w_after_filtering"]["median"] == 1.0
    assert report["annotators_per_item"] == {"1": 1, "2": 1, "3": 19}
    # Stricter: a bottom 30% of 20 = 6 items, the 2 lowest and 4 of the "mostly" ones (by id).
    kept, report = aggregate(items, Stage4Config(drop_bottom=0.3))
    assert report["dropped_bottom_share"] == 4 and report["n_kept"] == 14
    assert [i["id"] for i in kept if i["kendall_w"] < 1] == ["d16", "d17"]
    assert kept[0]["human_ranking"] == CANDS and kept[0]["borda"] == {
        "a": 9,
        "b": 6,
        "c": 3,
        "d": 0,
    }
    assert report["consensus_top1_is_retrieval_top1"] == 1.0


def test_no_annotations_is_an_error() -> None:
    with pytest.raises(HarnessError, match="2 or more annotators"):
        aggregate(make_items([[CANDS]]), Stage4Config())


def test_run_stage4_writes_final_dataset(tiny_dataset: Path, tmp_path: Path) -> None:
    items = [json.loads(line) for line in (tiny_dataset / "items.jsonl").read_text().splitlines()]
    for n, item in enumerate(items):
        best = item["human_ranking"]
        del item["human_ranking"]
        item["annotations"] = [best, best, best] if n else [best, best[::-1]]
    (tiny_dataset / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    report = run_stage4(tiny_dataset, tmp_path / "final")
    final = load_dataset(tmp_path / "final")
    assert [i.id for i in final.items] == ["d1", "d2"] and report["n_kept"] == 2
    assert final.items[0].human_ranking == tuple(items[1]["annotations"][0])
    assert set(final.clips) == {c for i in final.items for c in i.candidates}
    with pytest.raises(HarnessError, match="must differ"):
        run_stage4(tiny_dataset, tiny_dataset)
