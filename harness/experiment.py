"""Running experiment files end to end: each run, then one comparison table for a sweep."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from harness.cache import ResponseCache
from harness.config import ExperimentConfig
from harness.console import terminal
from harness.report.formatting import rich_table
from harness.report.run_report import human_rows, write_comparison
from harness.runner import Runner, RunResult
from harness.sync import run_coroutine


def run_all(
    configs: Sequence[ExperimentConfig],
    *,
    cache: ResponseCache,
    results_dir: Path = Path("results"),
    show_progress: bool = True,
    console: Console | None = None,
) -> list[RunResult]:
    console = console or terminal()
    results = []
    for config in configs:
        runner = Runner(config, cache=cache, results_dir=results_dir, show_progress=show_progress)
        results.append(run_coroutine(runner.run()))
    rows: list[tuple[str, Any]] = [(r.config.name, r.metrics_json()) for r in results]
    human = next((r.human.to_json() for r in results if r.human is not None), None)
    sweep = configs[0].sweep if configs else None
    title = sweep or configs[0].name
    console.print(rich_table(title, [*rows, *human_rows(human)]))
    if sweep:
        write_comparison(results_dir / sweep / "comparison.md", sweep, rows, human)
    for result in results:
        stats = result.stats
        console.print(
            f"[dim]{result.config.name}: {stats.calls} calls ({stats.model_calls} to the model, "
            f"{stats.cache_hits} cached), {stats.errors} failed, {stats.parse_failures} "
            f"unparsable, {stats.wall_s:.1f} s[/]"
        )
    where = results_dir / sweep if sweep else results[0].out_dir
    console.print(f"[dim]results in {where}/ (records.jsonl, metrics.json, report.md per run)[/]")
    return results


def find_runs(paths: Sequence[Path]) -> list[Path]:
    """Run folders among `paths`: each folder with a metrics.json, or those one level below."""
    found: list[Path] = []
    for path in paths:
        if (path / "metrics.json").is_file():
            found.append(path)
        elif path.is_dir():
            found.extend(sorted(p.parent for p in path.glob("*/metrics.json")))
    return found
