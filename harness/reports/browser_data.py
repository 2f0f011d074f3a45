"""The dialogue browser's data, trimmed to what a reader looks at. Per item: the gold (the
relevant candidates, or the human's ranking) and each run's top `TOP_K` candidates with
their captions, scores and each run's rank of them; the other candidates of a pool (a
MuseChat item has 500) in compact columns that the page draws only when asked ("show all").
Captions of those are in one table, each clip once."""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

import numpy as np
import numpy.typing as npt

from harness.core.dataset import Item
from harness.core.records import Record
from harness.reports.loading import RunData
from harness.reports.protocol_views import protocol_view
from harness.scoring.metrics import FloatArray

# Each run's top 10 are drawn with the gold: the cut-off of the pool metrics (SR@10, nDCG@10)
# and about what a reader compares by eye; with two runs and one gold, 21 rows at most.
TOP_K = 10
# A joint answer's presentation order is shown up to this many clips (then "and N more").
ORDER_SHOWN = 10


def score_text(value: float) -> str:
    return "n/a" if not math.isfinite(value) else f"{value:.3g}"


def run_ranks(scores: FloatArray) -> npt.NDArray[np.int64]:
    """Each candidate's rank by score along the last axis (one row per run): 1 + the
    candidates scored strictly higher (ties share the best rank; a missing score ranks after
    every score)."""
    lowered = -np.where(np.isfinite(scores), scores, -np.inf)
    order = np.argsort(lowered, axis=-1, kind="stable")
    ordered = np.take_along_axis(lowered, order, axis=-1)
    n = ordered.shape[-1]
    starts = np.ones(ordered.shape, dtype=bool)
    starts[..., 1:] = ordered[..., 1:] != ordered[..., :-1]
    first = np.maximum.accumulate(np.where(starts, np.arange(n), 0), axis=-1)
    ranks = np.empty(ordered.shape, dtype=np.int64)
    np.put_along_axis(ranks, order, first + 1, axis=-1)
    return ranks


def _answer(run_index: int, record: Record) -> dict[str, Any]:
    order = record.candidates
    answer: dict[str, Any] = {
        "run": run_index,
        "candidates": order[:ORDER_SHOWN],
        "repeat": record.repeat,
        "raw": record.raw,
        "error": record.error,
        "parse_error": record.parse_error,
    }
    if len(order) > ORDER_SHOWN:
        answer["n_candidates"] = len(order)
    return answer


BLOCK_ELEMENTS = 1 << 20  # items x runs x candidates ranked at once


def _score_blocks(
    items: list[Item], runs: list[RunData]
) -> dict[str, tuple[FloatArray, npt.NDArray[np.int64]]]:
    """Per item: its (runs x candidates) scores (NaN where a run has none, or scored
    another number of candidates) and each run's ranks (`run_ranks`), ranked a block of items
    with as many candidates at a time."""
    by_width: dict[int, list[Item]] = {}
    for item in items:
        by_width.setdefault(len(item.candidates), []).append(item)
    out: dict[str, tuple[FloatArray, npt.NDArray[np.int64]]] = {}
    for n, same in by_width.items():
        missing = np.full(n, np.nan)
        step = max(1, BLOCK_ELEMENTS // max(1, n * len(runs)))
        for first in range(0, len(same), step):
            block = same[first : first + step]
            matrix = np.array(
                [
                    [
                        given
                        if (given := run.scores.get(item.id)) is not None and len(given) == n
                        else missing
                        for run in runs
                    ]
                    for item in block
                ],
                dtype=np.float64,
            ).reshape(len(block), len(runs), n)
            ranks = run_ranks(matrix)
            out |= {item.id: (matrix[i], ranks[i]) for i, item in enumerate(block)}
    return out


def _candidates(
    item: Item, matrix: FloatArray, ranks: npt.NDArray[np.int64]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(the shown candidates, the others in columns), each in display order: the human's
    order, else the gold first (most relevant first), then by the best rank any run gives.
    `matrix`: the runs' scores of the item's candidates; `ranks`: each run's ranks of them."""
    ids = item.candidates
    n = len(ids)
    human = {cid: rank for rank, cid in enumerate(item.human_ranking or (), start=1)}
    relevance = item.relevance if item.relevance_form else {}
    finite = np.isfinite(matrix)
    texts = [[score_text(v) for v in row] for row in matrix.tolist()]
    tops = ((ranks == 1) & finite).astype(int).tolist()
    rank_lists = ranks.tolist()
    best = ranks.min(axis=0).tolist()
    order = sorted(
        range(n),
        key=lambda i: (
            ids[i] not in human,
            human.get(ids[i], 0),
            -relevance.get(ids[i], 0.0),
            best[i],
        ),
    )
    keep = {i for i, cid in enumerate(ids) if cid in human or relevance.get(cid)}
    if n > TOP_K:
        for r in np.flatnonzero(finite.any(axis=1)):
            keep.update(np.argsort(ranks[r], kind="stable")[:TOP_K].tolist())
    else:
        keep = set(range(n))
    runs_range = range(len(matrix))
    shown, rest = [], [i for i in order if i not in keep]
    for i in (i for i in order if i in keep):
        cid = ids[i]
        candidate: dict[str, Any] = {
            "id": cid,
            "caption": "",
            "rank": human.get(cid),
            "cells": [[texts[r][i], tops[r][i]] for r in runs_range],
            "run_ranks": [rank_lists[r][i] for r in runs_range],
        }
        if relevance.get(cid):
            candidate["relevance"] = relevance[cid]
        shown.append(candidate)
    more: dict[str, Any] = {}
    if rest:
        more = {
            "ids": [ids[i] for i in rest],
            "scores": [[texts[r][i] for i in rest] for r in runs_range],
            "ranks": [[rank_lists[r][i] for i in rest] for r in runs_range],
        }
        if human:
            more["human"] = [human.get(ids[i]) for i in rest]
    return shown, more


def _has_view(record: Record) -> bool:
    """Whether the record is a refine turn or a description (what protocol_view shows)."""
    return "turn" in record.extra or isinstance(record.extra.get("description"), str)


def item_data(runs: list[RunData]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Items of the first run's dataset that any run scored, in dataset order, as the page
    script reads them (`n_more`: how many candidates "show all" adds); and what "show all"
    draws: `items` (item id -> the other candidates' columns) and `captions`."""
    reference = runs[0].dataset
    hits = [run.per_item()["hit@1"] for run in runs]
    grouped: list[dict[str, list[Record]]] = []
    for run in runs:
        by_item: dict[str, list[Record]] = {}
        for record in run.records:
            by_item.setdefault(record.item_id, []).append(record)
        grouped.append(by_item)
    out, captions, columns = [], {}, {}
    viewed = [run for run in runs if any(_has_view(r) for r in run.records)]
    scored = [item for item in reference.items if any(item.id in run.scores for run in runs)]
    blocks = _score_blocks(scored, runs)
    for item in scored:
        shown, more = _candidates(item, *blocks[item.id])
        for candidate in shown:
            clip = reference.clips.get(candidate["id"])
            candidate["caption"] = clip.text if clip else ""
        for cid in more.get("ids", ()):
            if cid not in captions:
                clip = reference.clips.get(cid)
                captions[cid] = clip.text if clip else ""
        views = [
            asdict(view)
            for run, by_item in zip(runs, grouped, strict=True)
            if run in viewed
            and (view := protocol_view(run, by_item.get(item.id, []), item)) is not None
        ]
        answers = [
            _answer(i, record)
            for i, by_item in enumerate(grouped)
            for record in by_item.get(item.id, [])
            if record.raw is not None or record.error or record.parse_error
        ]
        entry: dict[str, Any] = {
            "id": item.id,
            "turns": [[turn.speaker, turn.text] for turn in item.dialogue],
            "query": item.query,
            "summary": item.summary,
            "candidates": shown,
            "answers": answers,
            "disagree": [i for i, hit in enumerate(hits) if hit.get(item.id, 1.0) < 1.0],
            "parse_failure": any(a["parse_error"] is not None for a in answers),
            "protocols": views,  # a refine run's turns and reply, a describe run's text
        }
        if more:
            entry["n_more"] = len(more["ids"])
            columns[item.id] = more
        out.append(entry)
    return out, {"items": columns, "captions": captions}
