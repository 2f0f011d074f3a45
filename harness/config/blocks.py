"""The nested blocks of an experiment file: `metrics:`, `rerank:`, `refine:`, `tracking:`."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from providers import ProviderBlock

__all__ = [
    "MetricsOptions",
    "MlflowOptions",
    "RefineOptions",
    "RerankOptions",
    "TrackingOptions",
    "WandbOptions",
]


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
    from (`aspects`, `item` or `simulator`: docs/experiments.md) and what the aspect user
    mentions."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    feedback: Literal["aspects", "item", "simulator"] = "aspects"
    mention: Literal["both", "wanted", "unwanted"] = "both"
    max_aspects: int = Field(default=3, ge=1, description="aspects named per side")
    skip_query_aspects: bool = Field(
        default=True, description="leave out wanted aspects the query already names"
    )


class WandbOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    project: str = Field(min_length=1)
    entity: str | None = None
    mode: Literal["offline", "online"] = "offline"
    dir: Path | None = Field(default=None, description="wandb writes DIR/wandb/ [default: results]")
    tags: tuple[str, ...] = ()


class MlflowOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    tracking_uri: str | None = Field(
        default=None, min_length=1, description="a folder or a server [default: results/mlruns]"
    )
    experiment: str | None = Field(
        default=None, description="MLflow experiment [default: the sweep's name, or the run's]"
    )


class TrackingOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    wandb: WandbOptions | None = None
    mlflow: MlflowOptions | None = None
