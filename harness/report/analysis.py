"""What `harness report` computes across runs: paired differences against a baseline,
agreement between runs and the human ranking, and position bias of joint prompts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from harness.human_ceiling import human_ceiling
from harness.metrics import Aggregate, FloatArray
from harness.report.loading import RunData
from harness.stats import (
    Agreement,
    PairedDifference,
    PositionBias,
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


def analyse(
    runs: Sequence[RunData],
    baseline: RunData | None = None,
    *,
    n_bootstrap: int = 1000,
    n_permutations: int = 10000,
    seed: int = 0,
) -> Analysis:
    paired = {}
    if baseline is not None:
        base = baseline.per_item()
        for run in runs:
            if run is not baseline:
                paired[run.label] = paired_metrics(
                    run.per_item(),
                    base,
                    n_bootstrap=n_bootstrap,
                    n_permutations=n_permutations,
                    seed=seed,
                )
    vectors = [(HUMAN, human_vectors(runs)), *((run.label, run.scores) for run in runs)]
    bias = {
        run.label: b
        for run in runs
        if (b := position_bias(run.records, run.dataset.items)) is not None
    }
    return Analysis(
        list(runs), baseline, paired, agreement_matrix(vectors), bias, shared_human_ceiling(runs)
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
