"""`harness compare A B --sequential` and `harness plan A B --effect D` (registered in
harness/cli/main.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from harness.cli.common import (
    check_range,
    console,
    err_console,
    interrupted_by,
    termination_as_interrupt,
    user_errors,
)
from harness.core.errors import HarnessError
from harness.core.sanitize import terminal_text

SIDES_HELP = (
    "An experiment file (one configuration), a run folder, or a predictions file (with --dataset)."
)
METRIC_HELP = (
    "Per-item metric: hit@1, mrr, ndcg, kendall_tau_b, or hit@K, recall@K, precision@K, ndcg@K."
)


def _check_alpha(alpha: float) -> None:
    if not 0 < alpha < 1:
        raise HarnessError(f"--alpha must lie strictly between 0 and 1, not {alpha:g}")


@user_errors
def compare(
    a: Annotated[Path, typer.Argument(help="A: " + SIDES_HELP)],
    b: Annotated[Path, typer.Argument(help="B: the same kind as A.")],
    sequential: Annotated[
        bool,
        typer.Option(
            "--sequential",
            help="Stop as soon as an anytime-valid confidence sequence decides (required).",
        ),
    ] = False,
    metric: Annotated[str, typer.Option(help=METRIC_HELP)] = "hit@1",
    alpha: Annotated[float, typer.Option(help="Error probability of the sequence.")] = 0.05,
    margin: Annotated[
        float | None,
        typer.Option(help="Stop as equivalent when the whole sequence lies inside ±margin."),
    ] = None,
    max_items: Annotated[int | None, typer.Option(help="Visit at most this many items.")] = None,
    budget_usd: Annotated[
        float | None,
        typer.Option(help="Stop before a batch that would take the spend past this (USD)."),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the order the items are visited in.")] = 0,
    batch_size: Annotated[
        int, typer.Option(help="Items asked (of both A and B) between two looks.")
    ] = 50,
    finite: Annotated[
        bool,
        typer.Option(
            help="Target the mean difference over these items (what two full runs would "
            "measure; sampling without replacement) instead of over items like them."
        ),
    ] = False,
    out: Annotated[
        Path, typer.Option(help="Folder for compare.json, compare.png and the runs.")
    ] = Path("results/compare"),
    dataset: Annotated[
        Path | None, typer.Option(help="Dataset folder (predictions files need it).")
    ] = None,
    cache_dir: Annotated[
        Path | None,
        typer.Option(
            help="Response cache directory [default: $BGM_JUDGE_CACHE or .cache/responses]."
        ),
    ] = None,
    progress: Annotated[bool, typer.Option(help="Show each batch's progress bar.")] = False,
) -> None:
    """Is B better than A? Visit the items in a seeded random order, batch by batch (for
    experiment files: run both on each batch through the cache, so a killed comparison
    resumes without paying twice), and stop as soon as the confidence sequence for
    mean(B - A) excludes 0, lies inside ±margin, or the items or budget run out. Writes
    compare.json and compare.png to --out; see docs/sequential.md."""
    from harness.calls.cache import ResponseCache
    from harness.runs.compare.engine import sequential_compare, write_comparison
    from harness.runs.compare.sources import open_sources

    if not sequential:
        raise HarnessError(
            "compare needs --sequential (for fixed-sample paired statistics of finished "
            "runs: harness report RUN... --baseline RUN)"
        )
    _check_alpha(alpha)
    if margin is not None and not margin > 0:
        raise HarnessError(f"--margin must be positive, not {margin:g}")
    if budget_usd is not None and not budget_usd > 0:
        raise HarnessError(f"--budget-usd must be positive, not {budget_usd:g}")
    check_range("--batch-size", batch_size, 1)
    check_range("--seed", seed, 0)
    if max_items is not None:
        check_range("--max-items", max_items, 1)
    if out.exists() and not out.is_dir():
        raise HarnessError(f"--out {out} is a file, not a folder")
    cache = ResponseCache(cache_dir)
    try:
        with termination_as_interrupt():
            source = open_sources(
                a,
                b,
                metric=metric,
                dataset=dataset,
                cache=cache,
                results_dir=out / "runs",
                show_progress=progress,
            )
            result = sequential_compare(
                source,
                metric=metric,
                alpha=alpha,
                margin=margin,
                batch_size=batch_size,
                max_items=max_items,
                budget_usd=budget_usd,
                finite=finite,
                seed=seed,
            )
    except KeyboardInterrupt:
        received = interrupted_by()
        err_console.print(
            "[bold yellow]interrupted:[/] re-run the same command to resume (every answer "
            "received so far is in the cache)"
        )
        raise typer.Exit(128 + received) from None
    finally:
        cache.close()
    written = write_comparison(result, out)
    console.print(terminal_text(result.line()), highlight=False, soft_wrap=True)
    console.print(f"[dim]wrote {', '.join(terminal_text(p) for p in written)}[/]")


@user_errors
def plan(
    a: Annotated[Path, typer.Argument(help="A pilot: a run folder or predictions file.")],
    b: Annotated[Path, typer.Argument(help="B pilot on the same items.")],
    effect: Annotated[float, typer.Option(help="True difference B - A to detect, e.g. 0.05.")],
    metric: Annotated[str, typer.Option(help=METRIC_HELP)] = "hit@1",
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

    _check_alpha(alpha)
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
    table = Table(
        title=f"Planning {metric}: B = {source.labels[1]} vs A = {source.labels[0]}, "
        f"effect {effect:+g}, alpha {alpha:g}",
        title_justify="left",
    )
    table.add_column("")
    table.add_column("items", justify="right")
    table.add_row(
        f"pilot: {d.size} items, B - A {d.mean():+.3f}, sd {d.std(ddof=1):.3f}",
        str(d.size),
    )
    table.add_row(
        f"minimum detectable difference on the pilot ({POWER:.0%} power)",
        f"{minimum_detectable_difference(d, alpha=alpha):.3f}",
    )
    table.add_row(f"fixed-sample paired test, {POWER:.0%} power", f"{fixed}")
    table.add_row(
        f"sequential: expected items (mean of {runs} simulated comparisons)", f"{sim.mean:.0f}"
    )
    table.add_row("sequential: median", f"{sim.quantile(0.5):.0f}")
    table.add_row(
        f"sequential: decided by ({POWER:.0%} of comparisons)", f"{sim.quantile(POWER):.0f}"
    )
    table.add_row(
        f"sequential: decided the right way within {max_items:,} items", f"{sim.decided:.0%}"
    )
    console.print(table)
