"""Consensus of several annotators' rankings of the same candidates: the Borda count (with N
candidates, rank r earns N - r points: 3, 2, 1, 0 for N = 4), ties broken hierarchically:
more rank-1 votes, then more rank-2 votes, then the better mean rank, then the candidate id.
Used to build a benchmark's consensus ranking (stage 4) and the leave-one-out consensus of the
human ceiling."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

Ranking = Sequence[str]  # candidate ids, best first


def positions(rankings: Sequence[Ranking], candidates: Sequence[str]) -> dict[str, list[int]]:
    """The 1-based rank each annotator gave each candidate."""
    ranks: dict[str, list[int]] = {c: [] for c in candidates}
    for ranking in rankings:
        if sorted(ranking) != sorted(candidates):
            raise ValueError(f"ranking {list(ranking)} is not a permutation of {list(candidates)}")
        for position, cid in enumerate(ranking, start=1):
            ranks[cid].append(position)
    return ranks


def borda_points(rankings: Sequence[Ranking], candidates: Sequence[str]) -> dict[str, int]:
    n = len(candidates)
    return {c: sum(n - r for r in ranks) for c, ranks in positions(rankings, candidates).items()}


def consensus(rankings: Sequence[Ranking], candidates: Sequence[str]) -> list[str]:
    """Borda order with the hierarchical tie-break; best first."""
    if not rankings:
        raise ValueError("no rankings to aggregate")
    n = len(candidates)
    ranks = positions(rankings, candidates)

    def key(cid: str) -> tuple[int, int, int, float, str]:
        r = ranks[cid]
        return (-sum(n - x for x in r), -r.count(1), -r.count(2), statistics.fmean(r), cid)

    return sorted(candidates, key=key)
