"""How a run asks its provider: the plans (`plans`: what a plan is, a judge's and a scorer's
calls; `rerank`, `refine` + `feedback`, `describe`: the other plans), and the summaries that
`inputs.dialogue: summary` sends. `call_plan` picks the plan of a run."""

from __future__ import annotations

from pathlib import Path

from harness.config.experiment import ExperimentConfig
from harness.protocols.describe import DescribeCalls
from harness.protocols.plans import CallPlan, JudgeCalls, ScorerCalls
from harness.protocols.refine import RefineCalls
from harness.protocols.rerank import RerankCalls
from providers import Provider

__all__ = ["call_plan"]


def call_plan(
    config: ExperimentConfig, provider: Provider, workdir: Path | None = None
) -> CallPlan:
    """The two-turn `protocol: refine`; a judge's `describe` prompt (then a retriever);
    retrieve-then-rerank (`rerank:`); else a judge's or a scorer's calls."""
    if config.protocol == "refine":
        return RefineCalls(config, provider, workdir)
    if config.prompt == "describe" and provider.kind == "judge":
        return DescribeCalls(config, provider, workdir)
    if config.rerank is not None:
        return RerankCalls(config, provider, workdir)
    plans: dict[str, type[CallPlan]] = {"judge": JudgeCalls, "scorer": ScorerCalls}
    return plans[provider.kind](config, provider, workdir)
