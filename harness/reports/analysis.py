"""What `harness report` computes across runs: paired differences (against one baseline, or
each run against its own `--pair-by` baseline) with multiplicity-adjusted p-values,
agreement between runs and the human ranking, position bias of joint prompts, and the
chance level of each metric."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from harness.core.dataset import Item
from harness.reports.loading import RunData
from harness.reports.pairing import pair_by
from harness.scoring import registry
from harness.scoring.evaluation import evaluate_predictions
from harness.scoring.human_ceiling import human_ceiling
from harness.scoring.metrics import Aggregate, FloatArray
from harness.scoring.stats import (
    Agreement,
    Correction,
    PairedDifference,
    PositionBias,
    adjust_p_values,
    agreement_matrix,
    paired_metrics,
    position_bias,
)

HUMAN = "human"


@dataclass
class Analysis:
    runs: list[RunData]
    baseline: RunData | None
    paired: dict[str, dict[str, PairedDifference]]  # run label -> metric -> difference
    agreement: Agreement
    position_bias: dict[str, PositionBias]  # run label -> bias, joint runs only
    paired_with: dict[str, str] = field(default_factory=dict)  # run label -> baseline label
    adjusted_p: dict[str, dict[str, float]] = field(default_factory=dict)  # like `paired`
    correction: Correction = "holm"
    pair_by: str | None = None  # "prompt=zero_shot" when each run has its own baseline
    notes: list[str] = field(default_factory=list)  # runs left without a baseline
    chance: dict[str, float] = field(default_factory=dict)  # metric -> expected under chance
    human: Aggregate | None = None  # the human ceiling of the runs' items, when annotated


def human_vectors(runs: Sequence[RunData]) -> dict[str, FloatArray]:
    """The human ranking as scores (relevance, N-1 .. 0) for every item of the runs."""
    out: dict[str, FloatArray] = {}
    for run in runs:
        for item in run.dataset.items:
            if item.id not in out and item.human_ranking:
                rel = item.relevance
                out[item.id] = np.array([rel[c] for c in item.candidates], dtype=np.float64)
    return out


def chance_levels(items: Sequence[Item]) -> dict[str, float]:
    """Each metric's expected value for a ranking drawn at random: the metrics of all-equal
    scores, since every metric is the expectation over random tie-breaking."""
    flat: dict[str, dict[str, float | None]] = {
        item.id: dict.fromkeys(item.candidates, 0.0) for item in items if item.relevance_form
    }
    if not flat:
        return {}
    ranked = [item for item in items if item.id in flat]
    summary = evaluate_predictions(ranked, {0: flat}, n_bootstrap=10).aggregate.metrics
    ranking = registry.names("ranking")
    return {name: float(summary[name].mean or 0.0) for name in ranking if name in summary}


def analyse(
    runs: Sequence[RunData],
    baseline: RunData | None = None,
    *,
    pair: tuple[str, str] | None = None,
    correction: Correction = "holm",
    n_bootstrap: int = 1000,
    n_permutations: int = 10000,
    seed: int = 0,
) -> Analysis:
    """Compare `runs`: against `baseline`, or with `pair` = (setting, value) each run
    against the run that differs from it only in that setting having that value."""
    notes: list[str] = []
    if pair is not None:
        pairs, notes = pair_by(runs, *pair)
    elif baseline is not None:
        pairs = [(run, baseline) for run in runs if run is not baseline]
    else:
        pairs = []
    paired = {
        run.label: paired_metrics(
            run.per_item(),
            base.per_item(),
            n_bootstrap=n_bootstrap,
            n_permutations=n_permutations,
            seed=seed,
        )
        for run, base in pairs
    }
    flat = [(label, name, d.p_value) for label, by in paired.items() for name, d in by.items()]
    adjusted_values = adjust_p_values([p for *_, p in flat], correction)
    adjusted: dict[str, dict[str, float]] = {}
    for (label, name, _), value in zip(flat, adjusted_values, strict=True):
        adjusted.setdefault(label, {})[name] = float(value)
    vectors = [(HUMAN, human_vectors(runs)), *((run.label, run.scores) for run in runs)]
    bias = {
        run.label: b
        for run in runs
        if (b := position_bias(run.records, run.dataset.items)) is not None
    }
    return Analysis(
        runs=list(runs),
        baseline=baseline if pair is None else None,
        paired=paired,
        agreement=agreement_matrix(vectors),
        position_bias=bias,
        paired_with={run.label: base.label for run, base in pairs},
        adjusted_p=adjusted,
        correction=correction,
        pair_by=None if pair is None else f"{pair[0]}={pair[1]}",
        notes=notes,
        chance=chance_levels(runs[0].dataset.items) if runs else {},
        human=shared_human_ceiling(runs),
    )


def shared_human_ceiling(runs: Sequence[RunData]) -> Aggregate | None:
    """The human ceiling of the items the runs evaluate, when they all evaluate the same
    items (of one dataset) and those carry annotations."""
    if not runs:
        return None
    first = runs[0]
    same = all(
        run.dataset.root.resolve() == first.dataset.root.resolve()
        and [i.id for i in run.dataset.items] == [i.id for i in first.dataset.items]
        for run in runs
    )
    if not same:
        return None
    config = first.config
    return human_ceiling(
        first.dataset.items,
        n_bootstrap=int(config.get("n_bootstrap") or 1000),
        seed=int(config.get("seed") or 0),
    )
