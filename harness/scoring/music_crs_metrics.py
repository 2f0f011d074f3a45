"""The figures of `protocol: music-crs` from each asked turn's answer (formulas:
docs/musicrs.md): nDCG@1/10/20 over turn means, catalog and lexical diversity, the response
judge's ratings and the leaderboard's composite, with CIs resampling sessions."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.scoring.evaluation import Evaluation, turn_gain
from harness.scoring.metrics import (
    Aggregate,
    FloatArray,
    MetricSummary,
    resample_blocks,
    resample_counts,
    summarize,
)

CUTOFFS = (1, 10, 20)
MAX_IDS = 20
WEIGHTS = {"ndcg@20": 0.5, "catalog_diversity": 0.1, "lexical_diversity": 0.1, "judge": 0.3}


@dataclass(frozen=True)
class Answer:
    """An asked turn (its gold; None on a blind set) and the submission's answer to it."""

    session: str
    turn: int
    gold: str | None
    ids: tuple[str, ...]
    response: str | None

    @property
    def rank(self) -> int:
        """The gold's rank among the first 20 ids (from 1); 0 when it is not there."""
        listed = self.ids[:MAX_IDS]
        return listed.index(self.gold) + 1 if self.gold in listed else 0


@dataclass(frozen=True)
class Ratings:
    """The response judge's ratings (1-5) by judged session: repeats x sessions (NaN where a
    repeat has none), each session's mean over its judged turns."""

    personalization: FloatArray
    explanation_quality: FloatArray

    @property
    def judge(self) -> FloatArray:
        both: FloatArray = (self.personalization + self.explanation_quality) / 2
        return both


def ndcg(ranks: FloatArray, k: int) -> FloatArray:
    """nDCG@k of one gold at each rank (0: not listed; NaN stays NaN)."""
    with np.errstate(divide="ignore"):
        gains = np.where((ranks >= 1) & (ranks <= k), 1 / np.log2(ranks + 1), 0.0)
    out: FloatArray = np.where(np.isnan(ranks), np.nan, gains)
    return out


def distinct_2(responses: Iterable[str | None]) -> float | None:
    """Unique word bigrams / all word bigrams: each response lower-cased, split on white space,
    its own bigrams (one of fewer than two words adds none); None when there are none."""
    seen: set[tuple[str, str]] = set()
    total = 0
    for response in responses:
        bigrams = list(itertools.pairwise((response or "").lower().split()))
        seen.update(bigrams)
        total += len(bigrams)
    return len(seen) / total if total else None


def turn_means(
    values: FloatArray, n_bootstrap: int, seed: int
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Of `values` (metrics x sessions x turns, NaN where a session lacks the turn): the mean
    over turns of each turn's mean over sessions, the plain mean, and both's bootstrap draws."""
    present = np.isfinite(values[0])
    filled = np.where(present, values, 0.0)
    asked = present.any(0)
    macro = (filled.sum(1)[:, asked] / present.sum(0)[asked]).mean(1)
    plain = filled.sum((1, 2)) / present.sum()
    n = present.shape[0]
    draws = np.empty((2, n_bootstrap, len(values)))
    for rows, counts in resample_counts(n_bootstrap, n, np.random.default_rng(seed)):
        count = counts @ present  # resamples x turns
        totals = np.einsum("rs,mst->rmt", counts, filled)
        with np.errstate(invalid="ignore", divide="ignore"):
            draws[0, rows] = np.nanmean(totals / np.where(count > 0, count, np.nan)[:, None], 2)
        draws[1, rows] = totals.sum(2) / count.sum(1)[:, None]
    return macro, draws[0], plain, draws[1]


def _summary(value: float | None, draws: FloatArray | None = None) -> MetricSummary:
    if value is None or draws is None:
        return MetricSummary(None if value is None else round(value, 6), None)
    low, high = np.percentile(draws, [2.5, 97.5])
    return MetricSummary(round(value, 6), (round(float(low), 6), round(float(high), 6)))


def _aggregate(n: int, metrics: dict[str, MetricSummary], **rest: Any) -> Aggregate:
    return Aggregate(n, 0, 1.0, None, "worst", metrics, **rest)


def _ndcg_figures(
    scored: Sequence[Answer], n_bootstrap: int, seed: int
) -> tuple[Evaluation, dict[str, tuple[float, FloatArray]]]:
    """nDCG@K (the aggregate: over turn means, per session its mean over turns; each turn's;
    the plain mean where the turns are uneven) and each exact mean with its draws."""
    sessions = list(dict.fromkeys(a.session for a in scored))
    numbers = sorted({a.turn for a in scored})
    ranks = np.full((len(sessions), len(numbers)), np.nan)
    row, column = {s: i for i, s in enumerate(sessions)}, {t: j for j, t in enumerate(numbers)}
    for answer in scored:
        ranks[row[answer.session], column[answer.turn]] = answer.rank
    names = [f"ndcg@{k}" for k in CUTOFFS]
    values = np.stack([ndcg(ranks, k) for k in CUTOFFS])
    macro, draws, plain, plain_draws = turn_means(values, n_bootstrap, seed)
    exact = {name: (float(macro[i]), draws[:, i]) for i, name in enumerate(names)}
    overall = {name: _summary(*exact[name]) for name in names}
    per_session = dict(zip(names, np.nanmean(values, axis=2), strict=True))
    turns = []
    for j, number in enumerate(numbers):
        here = np.isfinite(ranks[:, j])
        kept = {name: values[i, here, j] for i, name in enumerate(names)}
        options = {"n_bootstrap": n_bootstrap, "seed": seed}
        summaries = {name: summarize(name, v, **options) for name, v in kept.items()}
        ids = [s for s, asked in zip(sessions, here, strict=True) if asked]
        turns.append((number, _aggregate(len(ids), summaries, per_item=kept, item_ids=ids)))
    blocks = {}
    if len({a.n_items for _, a in turns}) > 1:
        blocks["plain_mean"] = {
            name: _summary(float(plain[i]), plain_draws[:, i]).to_json()
            for i, name in enumerate(names)
        }
    first, last = turns[0][1], turns[-1][1]
    evaluation = Evaluation(
        _aggregate(len(sessions), overall, per_item=per_session, item_ids=sessions),
        [],
        {},
        turns=turns,
        turn_gain=turn_gain(first, last, n_bootstrap=n_bootstrap, seed=seed),
        blocks=blocks,
    )
    return evaluation, exact


def music_crs_evaluation(
    answers: Sequence[Answer],
    *,
    catalog_size: int,
    ratings: Ratings | None = None,
    judge: float | None = None,
    n_bootstrap: int = 1000,
    seed: int = 0,
) -> Evaluation:
    """Every figure of the answers, under the organisers' names; blocks: `official` (their
    file's keys and values, unrounded), `plain_mean` (uneven turns). No gold at all (a blind
    set): no nDCG and no composite. `judge`: a judge score (1-5) known from elsewhere, for the
    composite when there are no `ratings`."""
    scored = [a for a in answers if a.gold is not None]
    if scored:
        evaluation, exact = _ndcg_figures(scored, n_bootstrap, seed)
    else:
        n_sessions = len({a.session for a in answers})
        evaluation, exact = Evaluation(_aggregate(n_sessions, {}), [], {}), {}
    metrics = evaluation.aggregate.metrics
    official: dict[str, Any] = {name: mean for name, (mean, _) in exact.items()}
    official["catalog_diversity"] = len({i for a in answers for i in a.ids}) / catalog_size
    lexical = distinct_2(a.response for a in answers)
    official["lexical_diversity"] = lexical or 0.0  # as the organisers' code counts none
    metrics["catalog_diversity"] = _summary(official["catalog_diversity"])
    metrics["lexical_diversity"] = _summary(lexical)
    judge_draws: Any = judge
    if ratings is not None:
        options = {"n_bootstrap": n_bootstrap, "seed": seed}
        for name in ("personalization", "explanation_quality", "judge"):
            metrics[name] = summarize(name, getattr(ratings, name), **options)
        per_session = np.nanmean(ratings.judge, axis=0)  # every session is rated somewhere
        judge, judge_draws = float(per_session.mean()), np.empty(n_bootstrap)
        rng = np.random.default_rng(seed)
        for rows, drawn in resample_blocks(n_bootstrap, per_session.size, rng):
            judge_draws[rows] = per_session[drawn].mean(axis=1)
    elif judge is not None:
        metrics["judge"] = _summary(judge)
    if judge is not None and "ndcg@20" in exact:
        ndcg20, ndcg20_draws = exact["ndcg@20"]
        fixed = sum(WEIGHTS[name] * official[name] for name in WEIGHTS if "diversity" in name)
        value = fixed + WEIGHTS["ndcg@20"] * ndcg20 + WEIGHTS["judge"] * (judge - 1) / 4
        draws = fixed + WEIGHTS["ndcg@20"] * ndcg20_draws + WEIGHTS["judge"] * (judge_draws - 1) / 4
        metrics["composite"], official["composite"] = _summary(value, draws), value
    official["total_catalog_size"] = catalog_size
    evaluation.blocks["official"] = official
    return evaluation
