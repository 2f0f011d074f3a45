"""A jury of judges (Verga et al. 2024, PoLL): each member answers under its own cache key
(`harness.protocols.jury`); `mean` averages the members' scores, `borda` sums the candidates
each member ranks below (ties half, a missing score last), `majority` is the share of members
whose top pick it is (k tied: 1/k each), `kemeny` counts the candidates below it in the order
that agrees with the most member pairs (ties half; averaged over the orders tied for that).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
from pydantic import Field, field_validator

from harness.core.types import ChatRequest, ChatResponse, ProviderConfig, ProviderError
from harness.scoring.alpha import ranks
from providers import REGISTRY, ProviderBlock, create_provider
from providers.base import Judge

Scores = Mapping[str, float | None]


class JuryOptions(ProviderConfig):
    members: list[ProviderBlock] = Field(min_length=2, description="the judges' provider blocks")
    combine: Literal["mean", "borda", "majority", "kemeny"] = "borda"

    @field_validator("members")
    @classmethod
    def _judges(cls, members: list[ProviderConfig]) -> list[ProviderConfig]:
        for member in members:
            if REGISTRY[member.name].kind != "judge" or member.name == "jury":
                raise ValueError(f"a jury's members are judges, not {member.name!r}")
        return members


def combine(
    how: str, answers: Sequence[Scores], candidates: Sequence[str]
) -> dict[str, float | None]:
    """Each candidate's jury score from the members' parsed `answers` (unparsed: empty)."""
    given = [a for a in answers if any(a.get(c) is not None for c in candidates)]
    if not given:
        return dict.fromkeys(candidates)
    values = np.array([[np.nan if a.get(c) is None else a[c] for c in candidates] for a in given])
    if how == "mean":
        counts = (~np.isnan(values)).sum(axis=0)
        total = np.where(counts > 0, np.nansum(values, axis=0) / np.maximum(counts, 1), np.nan)
        return {
            c: None if np.isnan(v) else float(v) for c, v in zip(candidates, total, strict=True)
        }
    ranked = np.array([ranks(row) for row in values])  # 1 = best, ties share, missing last
    if how == "borda":  # N - rank: the candidates ranked below, ties half
        points = (len(candidates) - ranked).sum(axis=0)
    elif how == "kemeny":
        points = kemeny(ranked)
    else:
        top = ranked == ranked.min(axis=1, keepdims=True)
        points = (top / top.sum(axis=1, keepdims=True)).mean(axis=0)
    return {c: float(p) for c, p in zip(candidates, points, strict=True)}


def kemeny(ranked: np.ndarray) -> np.ndarray:
    """Each candidate's places below it in the best orders of the members' `ranked` rows."""
    n = ranked.shape[1]
    if n > 8:
        raise ProviderError(f"a kemeny jury ranks at most 8 candidates, not {n}", transient=False)
    wins = ((np.sign(ranked[:, None, :] - ranked[:, :, None]) + 1) / 2).sum(axis=0)  # i over j
    later = np.triu(np.ones((n, n)), 1)
    orders = np.array(list(itertools.permutations(range(n))))
    agree = np.array([(wins[np.ix_(order, order)] * later).sum() for order in orders])
    best = orders[np.isclose(agree, agree.max())]
    return np.asarray((n - 1 - np.argsort(best, axis=1)).mean(axis=0))  # places below, averaged


class Jury(Judge):
    default_model = "jury"
    Options = JuryOptions
    config: JuryOptions

    def __init__(self, config: ProviderConfig) -> None:
        super().__init__(config)
        self.members = [create_provider(member) for member in self.config.members]

    def identity(self) -> dict[str, Any]:
        return {"combine": self.config.combine, "members": [m.identity() for m in self.members]}

    @property
    def deterministic(self) -> bool:
        return all(member.deterministic for member in self.members)

    def missing_key(self) -> str | None:
        return next((key for m in self.members if (key := m.missing_key())), None)

    async def generate(self, request: ChatRequest) -> ChatResponse:
        raise ProviderError("a jury asks its members (JudgeCalls)", transient=False)

    async def aclose(self) -> None:
        for member in self.members:
            await member.aclose()
