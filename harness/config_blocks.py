"""The nested blocks of an experiment file (`metrics:`, `rerank:`, `refine:`), re-exported
by `harness.config`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from providers import ProviderBlock

__all__ = ["MetricsOptions", "RefineOptions", "RerankOptions"]


class MetricsOptions(BaseModel):
    """`metrics:` block: the cut-offs K of hit@K, recall@K, precision@K and ndcg@K, and
    groups merged in the per-group breakdown (e.g. a small subreddit into a larger one)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    at: tuple[int, ...] = ()
    merge_groups: dict[str, str] = Field(default_factory=dict)

    @field_validator("at")
    @classmethod
    def _positive(cls, at: tuple[int, ...]) -> tuple[int, ...]:
        if any(k < 1 for k in at):
            raise ValueError(f"cut-offs must be >= 1, not {list(at)}")
        return tuple(sorted(set(at)))


class RerankOptions(BaseModel):
    """`rerank:` block: a scorer ranks every candidate, the judge orders only its `top`."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    retriever: ProviderBlock
    top: int = Field(default=20, ge=2)


class RefineOptions(BaseModel):
    """`refine:` block of `protocol: refine`: where the user's reply to the first pick comes
    from (`aspects`: a simulated user comparing the gold's aspects with the pick's; `item`:
    each item's own `feedback`; `simulator`: the `user_simulator:` judge) and what the
    aspect user mentions."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    feedback: Literal["aspects", "item", "simulator"] = "aspects"
    mention: Literal["both", "wanted", "unwanted"] = "both"
    max_aspects: int = Field(default=3, ge=1, description="aspects named per side")
    skip_query_aspects: bool = Field(
        default=True, description="leave out wanted aspects the query already names"
    )
