"""The dialogue browser's data, trimmed to what a reader looks at. Per item: the gold (the
relevant candidates, or the human's ranking) and each run's top `TOP_K` candidates with
their captions, scores and each run's rank of them; the other candidates of a pool (a
MuseChat item has 500) in compact columns that the page draws only when asked ("show all").
Captions of those are in one table, each clip once."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import numpy as np
import numpy.typing as npt

from harness.dataset import Item
from harness.records import Record
from harness.report.loading import RunData
from harness.report.protocol_views import protocol_view
from harness.scoring.metrics import FloatArray

# Each run's top 10 are drawn with the gold: the cut-off of the pool metrics (SR@10, nDCG@10)
# and about what a reader compares by eye; with two runs and one gold, 21 rows at most.
TOP_K = 10
# A joint answer's presentation order is shown up to this many clips (then "and N more").
ORDER_SHOWN = 10


def score_text(value: float) -> str:
    return "n/a" if not np.isfinite(value) else f"{value:.3g}"


def run_ranks(scores: FloatArray) -> npt.NDArray[np.int64]:
    """Each candidate's rank by score: 1 + the candidates scored strictly higher (ties share
    the best rank; a missing score ranks after every score)."""
    values = np.where(np.isfinite(scores), scores, -np.inf)
    ordered = np.sort(values)
    higher = len(values) - np.searchsorted(ordered, values, side="right")
    return (1 + higher).astype(np.int64)


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


def _candidates(item: Item, runs: list[RunData]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(the shown candidates, the others in columns), each in display order: the human's
    order, else the gold first (most relevant first), then by the best rank any run gives."""
    ranking = list(item.human_ranking or [])
    human = {cid: ranking.index(cid) + 1 for cid in ranking}
    relevance = item.relevance if item.relevance_form else {}
    n = len(item.candidates)
    scores, ranks, texts = [], [], []
    for run in runs:
        given = run.scores.get(item.id)
        vector = given if given is not None and len(given) == n else np.full(n, np.nan)
        scores.append(vector)
        ranks.append(run_ranks(vector))
        texts.append([score_text(float(v)) for v in vector])
    best = np.min(np.vstack(ranks), axis=0) if runs else np.zeros(n)
    order = sorted(
        range(n),
        key=lambda i: (
            item.candidates[i] not in human,
            human.get(item.candidates[i], 0),
            -relevance.get(item.candidates[i], 0.0),
            best[i],
        ),
    )
    keep = {i for i, cid in enumerate(item.candidates) if cid in human or relevance.get(cid)}
    for vector in scores:
        if np.isfinite(vector).any():
            top = np.argsort(-np.nan_to_num(vector, nan=-np.inf), kind="stable")[:TOP_K]
            keep.update(int(i) for i in top)
    shown, rest = [], [i for i in order if i not in keep]
    for i in (i for i in order if i in keep):
        cid = item.candidates[i]
        candidate: dict[str, Any] = {
            "id": cid,
            "caption": "",
            "rank": human.get(cid),
            "cells": [[texts[r][i], int(ranks[r][i] == 1)] for r in range(len(runs))],
            "run_ranks": [int(ranks[r][i]) for r in range(len(runs))],
        }
        if relevance.get(cid):
            candidate["relevance"] = relevance[cid]
        shown.append(candidate)
    more: dict[str, Any] = {}
    if rest:
        more = {
            "ids": [item.candidates[i] for i in rest],
            "scores": [[texts[r][i] for i in rest] for r in range(len(runs))],
            "ranks": [[int(ranks[r][i]) for i in rest] for r in range(len(runs))],
        }
        if human:
            more["human"] = [human.get(item.candidates[i]) for i in rest]
    return shown, more


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
    for item in reference.items:
        if not any(item.id in run.scores for run in runs):
            continue
        shown, more = _candidates(item, runs)
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
            if (view := protocol_view(run, by_item.get(item.id, []), item)) is not None
        ]
        answers = [
            _answer(i, record)
            for i, by_item in enumerate(grouped)
            for record in by_item.get(item.id, [])
            if record.raw is not None or record.error or record.parse_error
        ]
        entry = {
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
