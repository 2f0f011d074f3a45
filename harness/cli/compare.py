"""`harness compare A B [--sequential]` and `harness plan A B --effect D` (registered in
harness/cli/main.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Column, Table

from harness.cli.common import CacheDirOption, check_range, console, resumable, user_errors, warn
from harness.core.errors import HarnessError
from harness.core.sanitize import terminal_text
from harness.runs.compare.inputs import MissingChoice

SIDES_HELP = (
    "An experiment file (one configuration), a run folder, or a predictions file (with --dataset)."
)
MetricOption = Annotated[
    str,
    typer.Option(
        metavar="hit@1|mrr|ndcg|kendall_tau_b|hit@K|recall@K|precision@K|ndcg@K",
        help="A bounded per-item metric, named as in metrics.json (K a cut-off: ndcg@10).",
    ),
]


@user_errors
def compare(
    a: Annotated[Path, typer.Argument(help="A: " + SIDES_HELP)],
    b: Annotated[Path, typer.Argument(help="B: the same kind as A.")],
    sequential: Annotated[
        bool,
        typer.Option(
            "--sequential",
            help="Visit the items batch by batch and stop as soon as an anytime-valid "
            "confidence sequence decides (default: a fixed-sample paired test on every item).",
        ),
    ] = False,
    metric: MetricOption = "hit@1",
    alpha: Annotated[float, typer.Option(help="Error probability of the decision.")] = 0.05,
    margin: Annotated[
        float | None,
        typer.Option(
            help="Decide equivalent when the sequence (fixed: the 1 - 2 alpha CI) lies "
            "inside ±margin."
        ),
    ] = None,
    max_items: Annotated[
        int | None,
        typer.Option(help="Visit at most this many items (without --sequential: exactly as many)."),
    ] = None,
    missing: Annotated[
        MissingChoice,
        typer.Option(
            help="An item one side did not answer: left out (exclude), counted at chance "
            "level for that side (worst), or the comparison stops (refuse)."
        ),
    ] = "exclude",
    budget_usd: Annotated[
        float | None,
        typer.Option(
            help="Stop before a batch that would take the spend past this (USD; --sequential)."
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the order the items are visited in.")] = 0,
    batch_size: Annotated[
        int, typer.Option(help="Items asked (of both A and B) between two looks (--sequential).")
    ] = 50,
    finite: Annotated[
        bool,
        typer.Option(
            help="(--sequential) Target the mean difference over these items (what two full "
            "runs would measure; sampling without replacement) instead of over items like them."
        ),
    ] = False,
    out: Annotated[
        Path, typer.Option(help="Folder for compare.json, compare.png and the runs.")
    ] = Path("results/compare"),
    dataset: Annotated[
        Path | None, typer.Option(help="Dataset folder (predictions files need it).")
    ] = None,
    cache_dir: CacheDirOption = None,
    progress: Annotated[bool, typer.Option(help="Show each batch's progress bar.")] = False,
) -> None:
    """Is B better than A, on the items both answered? By default a fixed-sample paired
    test on every item (experiment files: both run in full, through the cache). With
    --sequential, visit the items in a seeded random order, batch by batch (experiment
    files: both run on each batch through the cache, so a killed comparison resumes without
    paying twice), and stop as soon as the confidence sequence for mean(B - A) excludes 0,
    lies inside ±margin, or the items or budget run out. Writes compare.json (and
    compare.png) to --out; see docs/sequential.md."""
    from harness.runs.reporting import compare as compare_sides

    with resumable():
        result = compare_sides(
            a,
            b,
            sequential=sequential,
            metric=metric,
            alpha=alpha,
            margin=margin,
            max_items=max_items,
            missing=missing,
            budget_usd=budget_usd,
            seed=seed,
            batch_size=batch_size,
            finite=finite,
            out=out,
            dataset=dataset,
            cache_dir=cache_dir,
            show_progress=progress,
        )
    warn([result.warning] if result.warning else [])
    console.print(terminal_text(result.line()), highlight=False, soft_wrap=True)
    for label, marks in result.unofficial.items():
        for mark in marks:
            console.print(
                f"[yellow]†[/] {terminal_text(label)}: endpoint {terminal_text(mark)} is not the "
                "provider's official service",
                highlight=False,
                soft_wrap=True,
            )
    console.print(f"[dim]wrote {', '.join(terminal_text(p) for p in result.files)}[/]")


@user_errors
def plan(
    a: Annotated[Path, typer.Argument(help="A pilot: a run folder or predictions file.")],
    b: Annotated[Path, typer.Argument(help="B pilot on the same items.")],
    effect: Annotated[float, typer.Option(help="True difference B - A to detect, e.g. 0.05.")],
    metric: MetricOption = "hit@1",
    alpha: Annotated[float, typer.Option(help="Error probability of the test.")] = 0.05,
    dataset: Annotated[
        Path | None, typer.Option(help="Dataset folder (predictions files need it).")
    ] = None,
    batch_size: Annotated[
        int, typer.Option(help="Items per look of the sequential comparison.")
    ] = 50,
    max_items: Annotated[
        int, typer.Option(help="Simulated sequential comparisons stop here undecided.")
    ] = 20_000,
    runs: Annotated[int, typer.Option(help="Simulated sequential comparisons.")] = 200,
    seed: Annotated[int, typer.Option(help="Seed of the simulation.")] = 0,
) -> None:
    """How many items a comparison needs before paying for it: from a pilot of A and B
    (e.g. 100 items), the items for 80% power at --effect with a fixed-sample paired test,
    and the items the sequential comparison visits (simulated on the pilot's differences
    tilted to that mean)."""
    import numpy as np

    from harness.runs.compare.sources import metric_spec, open_sources
    from harness.scoring.power import (
        POWER,
        items_needed,
        minimum_detectable_difference,
        simulate_sequential,
    )

    if not 0 < alpha < 1:
        raise HarnessError(f"--alpha must lie strictly between 0 and 1, not {alpha:g}")
    if effect == 0:
        raise HarnessError("--effect must be non-zero")
    check_range("--batch-size", batch_size, 1)
    check_range("--max-items", max_items, 1)
    check_range("--runs", runs, 10, 10_000)
    if any(p.suffix in (".yaml", ".yml") for p in (a, b)):
        raise HarnessError("plan reads finished pilots (run folders or predictions files)")
    _, width = metric_spec(metric)
    source = open_sources(
        a, b, metric=metric, dataset=dataset, cache=None, results_dir=Path("unused")
    )
    va, vb = source.values(source.item_ids)
    d = np.array([vb[i] - va[i] for i in source.item_ids])
    try:
        sim = simulate_sequential(
            d,
            effect,
            width=width,
            alpha=alpha,
            batch=batch_size,
            max_items=max_items,
            runs=runs,
            seed=seed,
        )
    except ValueError as exc:
        raise HarnessError(f"{exc}: pilot more items or plan a smaller effect") from None
    fixed = items_needed(d, effect, alpha=alpha)
    assert fixed is not None  # the simulation took the pilot: two items at least
    console.print(
        f"Planning {metric}: B = {source.labels[1]} vs A = {source.labels[0]}, "
        f"effect {effect:+g}, alpha {alpha:g}\npilot: {d.size} items, B - A {d.mean():+.3f}, "
        f"sd {d.std(ddof=1):.3f}; minimum detectable difference on the pilot "
        f"({POWER:.0%} power): {minimum_detectable_difference(d, alpha=alpha):.3f}",
        highlight=False,
    )
    by_power = sim.quantile(POWER)
    table = Table("design", Column("items", justify="right"))
    table.add_row(f"fixed-sample paired test, {POWER:.0%} power", f"{fixed:,}")
    table.add_row(f"sequential: expected (mean of {runs} simulated)", f"{sim.mean:,.0f}")
    table.add_row("sequential: median", f"{sim.quantile(0.5):,.0f}")
    table.add_row(
        f"sequential: {POWER:.0%} of comparisons decided by",
        f"{by_power:,.0f}" if sim.decided >= POWER else f">{max_items:,}",
    )
    console.print(table)
    console.print(
        f"sequential: {sim.decided:.0%} decided the right way within {max_items:,} items\n"
        + _better_buy(fixed, sim.mean, sim.decided, max_items)
        + "\n--finite (compare) covers the mean over the dataset's own items instead: "
        "a comparison that visits every item then always decides, as the sequence shrinks "
        "to those items' own difference, and says nothing about items beyond them. "
        "This plan is for items like these (the default).",
        highlight=False,
        soft_wrap=True,
    )


def _better_buy(fixed: int, expected: float, decided: float, max_items: int) -> str:
    """Which design reaches the planned power on fewer items at the planned effect."""
    from harness.scoring.power import POWER

    if decided >= POWER and expected < fixed:
        return (
            f"better buy at this effect: the sequential comparison (about {expected:,.0f} "
            f"items expected, against {fixed:,} for a fixed-size test): "
            "harness compare A.yaml B.yaml --sequential"
        )
    if decided < POWER:
        cost = (
            f"decided the right way within {max_items:,} items in only {decided:.0%} of the "
            "simulated runs"
        )
    else:
        cost = f"expects {expected / fixed:.1f}x as many items here ({expected:,.0f})"
    return (
        f"better buy at this effect: a fixed-size comparison of {fixed:,} items "
        f"({POWER:.0%} power): harness compare A.yaml B.yaml --max-items {fixed}. The "
        f"sequential comparison {cost}: it pays off when the true difference may be well "
        "above the planned one (it stops as soon as the data allow), or to stop for "
        "equivalence (--margin)."
    )
