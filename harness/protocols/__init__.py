"""How a run asks its provider: the plans of the protocols and the summaries. `call_plan` picks a
run's plan from the protocol registry (`harness.config.protocols`)."""

from __future__ import annotations

from pathlib import Path

from harness.config.experiment import ExperimentConfig
from harness.config.protocols import get_protocol, resolve
from harness.protocols.jury import JuryCalls
from harness.protocols.plans import CallPlan, JudgeCalls
from providers import Provider
from providers.jury import Jury

__all__ = ["call_plan"]


def call_plan(
    config: ExperimentConfig, provider: Provider, workdir: Path | None = None
) -> CallPlan:
    """The plan that the run's protocol names for its kind of provider (a jury's judge
    calls: `JuryCalls`)."""
    plan: type[CallPlan] = resolve(get_protocol(config.protocol).plans[provider.kind])
    if plan is JudgeCalls and isinstance(provider, Jury):
        plan = JuryCalls
    return plan(config, provider, workdir)
