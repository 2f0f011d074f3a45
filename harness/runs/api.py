"""The Python API (`harness.run`, `harness.evaluate`, `harness.load_run`), the one pipeline
behind the command line. What only a run needs is imported by `run`, so `harness evaluate`
starts without it."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from harness.core.errors import HarnessError
from harness.core.records import read_records
from harness.runs.evaluating import evaluate as evaluate
from harness.runs.evaluating import evaluation as evaluation

if TYPE_CHECKING:
    import pandas as pd

    from harness.config.experiment import ExperimentConfig
    from harness.runs.runner import RunResult

    Experiment: TypeAlias = str | Path | ExperimentConfig | Mapping[str, Any]


def run(
    experiment: Experiment,
    *,
    results_dir: str | Path = "results",
    cache_dir: str | Path | None = None,
    seed_cache: str | Path | None = None,
    show_progress: bool = True,
    overwrite: bool = False,
    only: Sequence[str] = (),
    shard: str | None = None,
    set: Sequence[str] = (),
    dry_run: bool = False,
    output_tokens: int | None = None,
    save_experiment: str | Path | None = None,
    **overrides: Any,
) -> list[RunResult]:
    """Run an experiment (a file, an `ExperimentConfig` or a mapping of its fields) as
    `harness run` does: each run's calls, answered by the cache where it can, then its folder
    under `results_dir`, and a sweep's comparison. Returns one result per run (`.aggregate`,
    `.stats`, `.out_dir`); works inside a running event loop (Jupyter) too. `show_progress`:
    print the progress bar and the results table (False: print nothing).

    `set`: `--set KEY=VALUE` overrides; keyword `overrides` replace top-level settings
    (`limit=5`; on a sweep `name=` names the sweep). `only`: shell patterns of the runs to
    make; `shard`: "I/N"; `seed_cache`: a second, read-only cache [default: the file's
    `cache.seed`]; `overwrite`: replace a finished run of another configuration (refused
    otherwise); `dry_run`: print what the runs would call and cost, call nothing, return no
    result; `save_experiment`: write the settings it runs (`set` and `overrides` applied) to
    this YAML file. A key that uncached calls need and that is not set stops it before any
    call."""
    from harness.calls.cache import ResponseCache
    from harness.calls.portable_cache import open_seed
    from harness.config.checks import check_datasets, select_runs
    from harness.core.console import terminal
    from harness.core.sharding import Shard
    from harness.runs.dry_run import dry_run as estimate
    from harness.runs.dry_run import unset_keys
    from harness.runs.run_folder import check_run_folder
    from harness.runs.runner import run_folder

    results = Path(results_dir)
    part = Shard.parse(shard) if shard is not None else None
    every = _configs(experiment, set, overrides)
    configs = select_runs(every, only)
    if save_experiment is not None:  # valid settings only, and before anything is paid for
        Path(save_experiment).write_text(_settings_yaml(experiment, set, overrides))
    if isinstance(experiment, str | Path):
        check_datasets(experiment, configs)
    if results.exists() and not results.is_dir():
        raise HarnessError(f"--results-dir {results} is a file, not a folder")
    seed = seed_cache if seed_cache is not None else configs[0].cache.seed
    cache = ResponseCache(cache_dir, seed=open_seed(Path(seed)) if seed is not None else None)
    try:
        if dry_run:
            estimate(
                configs,
                cache=cache,
                results_dir=results,
                console=terminal(),
                output_tokens=output_tokens,
                shard=part,
            )
            return []
        unset = unset_keys(configs, cache=cache, results_dir=results)
        if unset:  # before the first call of the first run, not after the offline ones
            hint = "set it, or leave those runs out with --only PATTERN (see --dry-run)"
            raise HarnessError("\n".join(f"{line}; {hint}" for line in unset))
        for config in configs:  # before anything runs, not halfway through a sweep
            check_run_folder(run_folder(results, config, part), config, overwrite=overwrite)
        options = {"cache": cache, "results_dir": results, "shard": part}
        options |= {"show_progress": show_progress, "overwrite": overwrite}
        made = [_tracked(config, options) for config in configs]
    finally:
        cache.close()
    if part is None:  # a shard's metrics are a part's: its merge makes the sweep's files
        _write_sweep(made, results, [config.name for config in every])
    if show_progress:
        print_summary(made, results)
    return made


def _write_sweep(results: list[RunResult], results_dir: Path, names: list[str]) -> None:
    """A sweep's comparison.md and the order of its runs `names`, where the runs that --only
    left out keep their rows from their folders."""
    from harness.reports.run_report import write_comparison
    from harness.reports.sources import SWEEP_FILE

    sweep = results[0].config.sweep
    if sweep is None:
        return
    folder = results_dir / sweep
    rows, failed, human = _rows(results)
    made = {r.config.name for r in results}
    rows += [row for name in names if name not in made and (row := _earlier(folder / name))]
    rows.sort(key=lambda row: names.index(row[0].removesuffix(" †")))
    write_comparison(folder / "comparison.md", sweep, rows, human, failed=failed)
    order = {"sweep": sweep, "runs": names}
    (folder / SWEEP_FILE).write_text(json.dumps(order, indent=2) + "\n")


def _rows(
    results: list[RunResult],
) -> tuple[list[tuple[str, Any]], list[tuple[str, str]], dict[str, Any] | None]:
    """The runs' metrics rows (a name with † where the endpoint was not official), the runs
    without metrics and why, and the human ceiling."""
    rows: list[tuple[str, Any]] = [
        (r.config.name + (" †" if r.unofficial else ""), r.metrics_json())
        for r in results
        if r.no_scores is None
    ]
    failed = [(r.config.name, r.no_scores or "") for r in results if r.no_scores is not None]
    human = next((r.human.to_json() for r in results if r.human is not None), None)
    return rows, failed, human


def print_summary(results: list[RunResult], results_dir: Path) -> None:
    """What `harness run` prints: the runs' metrics as one table, what failed or needs a
    mark, each run's calls, and where the results are."""
    from harness.core.console import terminal
    from harness.core.provenance import drifted_packages, environment
    from harness.core.sanitize import terminal_text
    from harness.reports.formatting import rich_table
    from harness.reports.run_report import human_rows

    console = terminal()
    rows, failed, human = _rows(results)
    sweep = results[0].config.sweep
    if rows:
        console.print(rich_table(sweep or results[0].config.name, [*rows, *human_rows(human)]))
    lines = [
        f"[yellow]†[/] {terminal_text(r.config.name)}: endpoint {terminal_text(mark)} is not "
        "the provider's official service"
        for r in results
        for mark in r.unofficial
    ]
    drift = drifted_packages({"provenance": {"environment": environment()}})
    if drift:
        lines.append(
            f"[yellow]‡[/] this environment differs from the lock "
            f"({terminal_text('; '.join(drift))}): `make install` restores it"
        )
    lines += [
        f"[bold red]no metrics:[/] {terminal_text(name)}: {terminal_text(reason)}; "
        "chance-level numbers are not reported"
        for name, reason in failed
    ]
    for line in lines:
        console.print(line, highlight=False)
    for result in results:
        stats = result.stats
        repaired = stats.cache_repaired
        earlier = (stats.batch or {}).get("answered_attached", 0)
        console.print(
            f"[dim]{terminal_text(result.config.name)}: {stats.calls} calls "
            f"({stats.model_calls} to the model, {stats.cache_hits} cached"
            + (f", {earlier} from batch jobs sent earlier" if earlier else "")
            + (f", {stats.seeded} of them from the seed cache" if stats.seeded else "")
            + f"), {stats.errors} failed, {stats.parse_failures} "
            f"unparsable, {stats.wall_s:.1f} s"
            + (f"; {repaired} damaged cache entries were asked again" if repaired else "")
            + "[/]"
        )
    where = results_dir / sweep if sweep else results[0].out_dir
    console.print(
        f"[dim]results in {terminal_text(where)}/ (records.jsonl, metrics.json, report.md per "
        "run)[/]"
    )


def _earlier(folder: Path) -> tuple[str, dict[str, Any]] | None:
    """The row of a sweep's run made before (left out by --only), where it finished."""
    from harness.core.provenance import unofficial_endpoints
    from harness.core.run_files import read_or_empty

    metrics = read_or_empty(folder / "metrics.json")
    if not metrics.get("metrics"):
        return None
    mark = " †" if unofficial_endpoints(read_or_empty(folder / "run.json")) else ""
    return folder.name + mark, metrics


def _tracked(config: ExperimentConfig, options: dict[str, Any]) -> RunResult:
    """One run (the `Runner` of `config` with `options`), logged to the trackers of its
    `tracking:` block (a failed or interrupted run is marked so before the exception goes on).
    A re-run of a run logged to the same trackers logs nothing unless it called the model."""
    from harness.core.event_loop import run_coroutine
    from harness.core.secrets import scrub_value
    from harness.interop.tracking import logged_before, open_trackers, settle
    from harness.runs.runner import Runner, run_folder

    settings, results = scrub_value(config.model_dump(mode="json")), options["results_dir"]
    logged = logged_before(run_folder(results, config, options["shard"]), settings["tracking"])
    trackers = [] if logged else open_trackers(config.tracking, settings, results)
    try:
        result = run_coroutine(Runner(config, **options).run())
    except BaseException as exc:
        interrupted = isinstance(exc, KeyboardInterrupt)
        reason = None if interrupted else f"{type(exc).__name__}: {exc}"
        _warn(settle(trackers, "interrupted" if interrupted else "failed", reason=reason))
        raise
    if logged and result.stats.model_calls:  # answers paid again: a new tracker run
        trackers = open_trackers(config.tracking, settings, results)
    complete = result.complete and result.no_scores is None
    _warn(settle(trackers, "finished" if complete else "incomplete", result.out_dir))
    return result


def _warn(lines: list[str]) -> None:
    from harness.core.console import terminal
    from harness.core.sanitize import terminal_text

    for line in lines:
        terminal(stderr=True).print(f"[bold yellow]warning:[/] {terminal_text(line)}")


def _configs(
    experiment: Experiment, settings: Sequence[str], overrides: Mapping[str, Any]
) -> list[ExperimentConfig]:
    from harness.config.experiment import ExperimentConfig
    from harness.config.loading import experiments_from, load_experiments

    if isinstance(experiment, ExperimentConfig) and not (settings or overrides):
        return [experiment]
    if isinstance(experiment, ExperimentConfig | Mapping):
        raw = experiment.model_dump() if isinstance(experiment, ExperimentConfig) else experiment
        return experiments_from(raw, "experiment", overrides=settings, replace=overrides)
    return load_experiments(experiment, overrides=settings, replace=overrides)


def _settings_yaml(
    experiment: Experiment, settings: Sequence[str], overrides: Mapping[str, Any]
) -> str:
    import yaml

    from harness.config.experiment import ExperimentConfig
    from harness.config.overrides import apply_overrides
    from harness.core.yaml_files import load_yaml

    if isinstance(experiment, ExperimentConfig):
        raw = experiment.model_dump(mode="json", exclude_defaults=True)
    else:
        raw = dict(experiment) if isinstance(experiment, Mapping) else load_yaml(Path(experiment))
    return yaml.safe_dump(apply_overrides(raw, settings) | dict(overrides), sort_keys=False)


def load_run(folder: str | Path) -> pd.DataFrame:
    """A run's records.jsonl as a pandas DataFrame, one row per model call, in the schema of
    `harness export parquet`'s records.parquet (run, sweep, item_id, repeat, candidates, raw,
    attempts, scores, error, parse_error, cache_hit, latency_s, input_tokens, output_tokens,
    extra); `.attrs` holds the run's metrics.json and config.yaml. A records.parquet file
    is read as well (every run it holds)."""
    from harness.core.run_files import read_json_file, read_run_config
    from harness.interop.parquet import read_records_parquet, records_frame, records_table

    folder = Path(folder)
    if folder.is_file() and folder.suffix == ".parquet":
        return read_records_parquet(folder)
    path = folder / "records.jsonl"
    if not path.is_file():
        raise HarnessError(f"{folder}: no records.jsonl (is this a finished run folder?)")
    settings = (
        read_run_config(folder / "config.yaml") if (folder / "config.yaml").is_file() else None
    )
    sweep = settings.get("sweep") if settings else None
    frame = records_frame(records_table(read_records(path), folder.name, sweep))
    if (folder / "metrics.json").is_file():
        frame.attrs["metrics"] = read_json_file(folder / "metrics.json")
    if settings is not None:
        frame.attrs["config"] = settings
    return frame
