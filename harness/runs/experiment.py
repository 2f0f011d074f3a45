"""Running experiment files end to end: each run, then one comparison table for a sweep."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from harness.calls.cache import ResponseCache
from harness.config.experiment import ExperimentConfig
from harness.core.console import terminal
from harness.core.event_loop import run_coroutine
from harness.core.provenance import drifted_packages, environment
from harness.core.sanitize import terminal_text
from harness.core.secrets import scrub_value
from harness.core.sharding import Shard
from harness.interop.tracking import open_trackers
from harness.reports.formatting import rich_table
from harness.reports.run_report import human_rows, write_comparison
from harness.reports.sources import SWEEP_FILE
from harness.runs.run_folder import check_run_folder
from harness.runs.runner import Runner, RunResult, run_folder


def run_all(
    configs: Sequence[ExperimentConfig],
    *,
    cache: ResponseCache,
    results_dir: Path = Path("results"),
    show_progress: bool = True,
    console: Console | None = None,
    overwrite: bool = False,
    shard: Shard | None = None,
) -> list[RunResult]:
    console = console or terminal()
    for config in configs:  # before anything runs, not halfway through a sweep
        check_run_folder(run_folder(results_dir, config, shard), config, overwrite=overwrite)
    results = []
    for config in configs:
        results.append(
            _tracked(
                config,
                cache,
                results_dir,
                show_progress=show_progress,
                overwrite=overwrite,
                shard=shard,
            )
        )
    scored = [r for r in results if r.no_scores is None]
    rows: list[tuple[str, Any]] = [(_marked(r), r.metrics_json()) for r in scored]
    failed = [(r.config.name, r.no_scores or "") for r in results if r.no_scores is not None]
    human = next((r.human.to_json() for r in results if r.human is not None), None)
    sweep = configs[0].sweep if configs else None
    title = sweep or configs[0].name
    if rows:
        console.print(rich_table(title, [*rows, *human_rows(human)]))
    for result in results:
        for mark in result.unofficial:
            console.print(
                f"[yellow]†[/] {terminal_text(result.config.name)}: endpoint {terminal_text(mark)} is not the "
                "provider's official service",
                highlight=False,
            )
    drift = drifted_packages({"provenance": {"environment": environment()}})
    if drift and results:
        console.print(
            f"[yellow]‡[/] this environment differs from the lock ({terminal_text('; '.join(drift))}): "
            "`make install` restores it",
            highlight=False,
        )
    for name, reason in failed:
        console.print(
            f"[bold red]no metrics:[/] {terminal_text(name)}: {terminal_text(reason)}; chance-level numbers are not "
            "reported",
            highlight=False,
        )
    if sweep and shard is None:  # a shard's metrics are a part's: its merge makes the run's
        folder = results_dir / sweep
        write_comparison(folder / "comparison.md", sweep, rows, human, failed=failed)
        order = {"sweep": sweep, "runs": [c.name for c in configs]}
        (folder / SWEEP_FILE).write_text(json.dumps(order, indent=2) + "\n")
    for result in results:
        stats = result.stats
        repaired = stats.cache_repaired
        earlier = (stats.batch or {}).get("answered_attached", 0)
        console.print(
            f"[dim]{terminal_text(result.config.name)}: {stats.calls} calls ({stats.model_calls} to the model, "
            f"{stats.cache_hits} cached"
            + (f", {earlier} from batch jobs sent earlier" if earlier else "")
            + (f", {stats.seeded} of them from the seed cache" if stats.seeded else "")
            + f"), {stats.errors} failed, {stats.parse_failures} "
            f"unparsable, {stats.wall_s:.1f} s"
            + (f"; {repaired} damaged cache entries were asked again" if repaired else "")
            + "[/]"
        )
    where = results_dir / sweep if sweep else results[0].out_dir
    console.print(
        f"[dim]results in {terminal_text(where)}/ (records.jsonl, metrics.json, report.md per run)[/]"
    )
    return results


def _tracked(
    config: ExperimentConfig,
    cache: ResponseCache,
    results_dir: Path,
    *,
    show_progress: bool,
    overwrite: bool,
    shard: Shard | None = None,
) -> RunResult:
    """One run, logged to the trackers of its `tracking:` block (a failed or interrupted
    run is marked so there before the exception goes on)."""
    trackers = open_trackers(config.tracking, scrub_value(config.model_dump(mode="json")))
    try:
        runner = Runner(
            config,
            cache=cache,
            results_dir=results_dir,
            show_progress=show_progress,
            overwrite=overwrite,
            shard=shard,
        )
        result = run_coroutine(runner.run())
    except KeyboardInterrupt:
        for tracker in trackers:
            tracker.finish("interrupted")
        raise
    except BaseException as exc:
        for tracker in trackers:
            tracker.finish("failed", f"{type(exc).__name__}: {exc}")
        raise
    complete = result.complete and result.no_scores is None
    for tracker in trackers:
        tracker.log(result.out_dir)
        tracker.finish("finished" if complete else "incomplete")
    return result


def _marked(result: RunResult) -> str:
    return result.config.name + (" †" if result.unofficial else "")
