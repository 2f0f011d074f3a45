"""A judge's agreement with the annotators: its mean ordinal alpha (`harness.scoring.alpha`)
with each, beside theirs with each other (the ceiling), and its leave-one-in rank by mean alpha
with the annotators other than each rater (1 = most in agreement). Without two `annotations`
per item, the `human_ranking` is the one human rater (no ceiling, no rank)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Any

import numpy as np

from harness.core.dataset import Item
from harness.scoring.alpha import pairwise_alphas, ranks
from harness.scoring.human_ceiling import annotator_names
from harness.scoring.sorted_block import FloatArray

CEILING_REASON = (
    "each item has one human ranking: the annotators' own alpha and the judge's rank among "
    "them need `annotations` from two or more annotators per item"
)


def _human_rankings(items: Sequence[Item]) -> tuple[list[str], list[dict[str, Sequence[str]]]]:
    """(annotator names, each item's rankings by annotator): the annotations where some item
    has two or more, else each item's human ranking as one rater's."""
    by_item: list[dict[str, Sequence[str]]] = [
        {"human": item.human_ranking or ()} for item in items
    ]
    if any(item.annotations and len(item.annotations) >= 2 for item in items):
        by_item = [dict(zip(annotator_names(i), i.annotations or (), strict=True)) for i in items]
    return list(dict.fromkeys(name for rankings in by_item for name in rankings)), by_item


def human_agreement(
    items: Sequence[Item],
    scores: Mapping[str, FloatArray],
    *,
    n_bootstrap: int = 1000,
    seed: int = 0,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """({"human_agreement": figures}, not measured) for a judge's mean `scores` per item."""
    used = [item for item in items if item.human_ranking and item.id in scores]
    if not used:
        reason = {"reason": "the items carry no human ranking", "set": []}
        return {}, {"human_agreement": reason}
    names, by_item = _human_rankings(used)
    units = sum(len(item.candidates) for item in used)
    ratings = np.full((1 + len(names), units), np.nan)
    unit_item = np.repeat(np.arange(len(used)), [len(item.candidates) for item in used])
    start = 0
    for item, rankings in zip(used, by_item, strict=True):
        stop = start + len(item.candidates)
        ratings[0, start:stop] = ranks(np.asarray(scores[item.id], dtype=np.float64))
        for row, name in enumerate(names, start=1):
            if name in rankings:
                place = {cid: p for p, cid in enumerate(rankings[name], start=1)}
                ratings[row, start:stop] = [place.get(cid, np.nan) for cid in item.candidates]
        start = stop
    h = len(names)
    judge_pairs = [(0, a) for a in range(1, h + 1)]
    human_pairs = list(combinations(range(1, h + 1), 2))
    whole, boot = pairwise_alphas(
        ratings, unit_item, len(used), judge_pairs + human_pairs, n_bootstrap=n_bootstrap, seed=seed
    )
    alphas = np.vstack([whole, boot])  # row 0: all items; then the resamples
    with warnings.catch_warnings():  # a resample where no pair varies: "mean of empty slice"
        warnings.simplefilter("ignore", RuntimeWarning)
        judge = np.nanmean(alphas[:, :h], axis=1)
        figures: dict[str, Any] = {"alpha": _value(judge), "annotators": h, "n_items": len(used)}
        if h < 2:
            return {"human_agreement": figures}, {
                "human_ceiling": {"reason": CEILING_REASON, "set": []}
            }
        among = alphas[:, h:]
        figures["alpha_human"] = _value(np.nanmean(among, axis=1))
        each = np.stack(
            [
                np.nanmean(among[:, [k for k, pair in enumerate(human_pairs) if a in pair]], axis=1)
                for a in range(1, h + 1)
            ],
            axis=1,
        )
    rank = 1.0 + (each > judge[:, None]).sum(1) + 0.5 * (each == judge[:, None]).sum(1)
    figures["rank"] = float(rank[0])
    low, high = np.percentile(rank[1:], [2.5, 97.5])
    figures["rank_ci95"] = [float(low), float(high)]
    return {"human_agreement": figures}, {}


def _value(values: FloatArray) -> dict[str, Any] | None:
    """The figure on all items (row 0) with the percentile CI of its resamples."""
    if not np.isfinite(values[0]):
        return None
    low, high = np.nanpercentile(values[1:], [2.5, 97.5])
    return {"mean": round(float(values[0]), 6), "ci95": [round(low, 6), round(high, 6)]}
