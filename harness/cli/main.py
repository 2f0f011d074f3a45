"""`harness` command line: run experiments, evaluate predictions, list providers, report."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from harness.cli.annotate import annotate
from harness.cli.cache import app as cache_app
from harness.cli.common import (
    EXIT_INCOMPLETE,
    CacheDirOption,
    HarnessGroup,
    check_range,
    console,
    err_console,
    interruptions_reported,
    resumable,
    user_errors,
    version_text,
)
from harness.cli.compare import compare, plan
from harness.cli.construct import app as construct_app
from harness.cli.evaluate import evaluate
from harness.cli.exports import app as export_app
from harness.cli.imports import app as import_app
from harness.cli.listing import list_
from harness.cli.results import merge, report, runs, view
from harness.cli.tag import tag
from harness.core.errors import DeprecatedSetting, HarnessError, PluginWarning
from harness.core.sanitize import terminal_text

app = typer.Typer(
    cls=HarnessGroup,
    help="bgm-judge: evaluate background-music recommendation for dialogues (DialBGM).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",  # docstrings reflow; [brackets] in help stay literal
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(export_app, name="export")
app.add_typer(import_app, name="import")
app.add_typer(cache_app, name="cache")
app.add_typer(construct_app, name="construct")
# The group's name before 0.2; kept for one release.
app.add_typer(construct_app, name="build", hidden=True)


def _print_version(value: bool) -> None:
    if value:
        console.print(version_text(), highlight=False)
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", is_eager=True, callback=_print_version
        ),
    ] = False,
) -> None:
    pass


if TYPE_CHECKING:
    from harness.runs.runner import RunResult


@user_errors
def run(
    experiment: Annotated[
        Path | None,
        typer.Argument(help="Experiment or sweep YAML file (experiments/NAME.yaml), or flags:"),
    ] = None,
    dataset: Annotated[
        str | None, typer.Option(metavar="DIR", help="Without a file: the dataset.")
    ] = None,
    provider: Annotated[
        list[str] | None,
        typer.Option(metavar="NAME[:MODEL]", help="Without a file: the provider (repeatable)."),
    ] = None,
    prompt: Annotated[
        list[str] | None,
        typer.Option(metavar="NAME", help="Without a file: the prompt variant (repeatable)."),
    ] = None,
    save_experiment: Annotated[
        Path | None, typer.Option(help="Write the settings run (flags, --set) to this YAML file.")
    ] = None,
    results_dir: Annotated[Path, typer.Option(help="Where run folders are written.")] = Path(
        "results"
    ),
    cache_dir: CacheDirOption = None,
    seed_cache: Annotated[
        Path | None,
        typer.Option(
            help="A second response cache (a cache folder or a `harness cache export` file) "
            "read only on a miss; what it answers is copied into --cache-dir [default: the "
            "experiment file's cache.seed].",
        ),
    ] = None,
    limit: Annotated[
        int | None, typer.Option(help="Only the first N items (quick checks).")
    ] = None,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Render every request, count cached ones, estimate tokens and cost; call nothing.",
        ),
    ] = False,
    output_tokens: Annotated[
        int | None,
        typer.Option(
            help="Output tokens assumed per call by --dry-run [default: the prompt variant's "
            "typical answer plus a thinking model's typical thinking]."
        ),
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="Override a setting of the file, validated like it: KEY=VALUE with a dotted "
            "key (provider.model=gemini-2.5-flash, limit=5, prompts=[zero_shot,cot]); "
            "repeatable. On a sweep, provider.KEY sets it in every providers entry.",
        ),
    ] = None,
    overwrite: Annotated[
        bool,
        typer.Option(
            "--overwrite",
            help="Replace a finished run of the same name made with another configuration "
            "(otherwise refused).",
        ),
    ] = False,
    shard: Annotated[
        str | None,
        typer.Option(
            help="Run only shard I of N (0-based, e.g. 0/4 .. 3/4: items by a hash of their id) "
            "into NAME.shard-I-of-N/; `harness merge` joins the shards into the run.",
        ),
    ] = None,
    only: Annotated[
        list[str] | None,
        typer.Option(
            "--only",
            metavar="PATTERN",
            help="Run only the runs of a sweep whose name matches PATTERN (shell-style: "
            "'popularity*', '*_summary_*'); repeatable. Names: --dry-run lists them.",
        ),
    ] = None,
) -> None:
    """Run an experiment: call the model (or the cache) for every item, then write
    records.jsonl, metrics.json, report.md and the resolved config to results/NAME/.
    Without a file: `harness run --dataset data/sample --provider gemini --prompt cot`."""
    from harness.config.overrides import flag_experiment
    from harness.runs import api

    flags = dataset or provider or prompt
    if experiment is not None and flags:
        raise HarnessError("give a file or --dataset/--provider/--prompt (--set changes a file)")
    if limit is not None:
        check_range("--limit", limit, 1)
    overrides = {"limit": limit} if limit is not None else {}
    with resumable():
        results = api.run(
            experiment or flag_experiment(dataset, provider or (), prompt or ()),
            results_dir=results_dir,
            cache_dir=cache_dir,
            seed_cache=seed_cache,
            show_progress=progress,
            overwrite=overwrite,
            only=only or (),
            shard=shard,
            set=set_ or (),
            dry_run=dry_run,
            output_tokens=output_tokens,
            save_experiment=save_experiment,
            **overrides,
        )
    if results and not progress:  # without the bar, still the table
        api.print_summary(results, results_dir)
    if not all(r.complete for r in results):
        for line in failure_summary(results):
            err_console.print(line, highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_INCOMPLETE)
    if any(r.no_scores is not None for r in results):  # every answer unparsable
        raise typer.Exit(EXIT_INCOMPLETE)


def failure_summary(results: list[RunResult]) -> list[str]:
    """What failed in each incomplete run and why (first message per kind of failure)."""
    lines = []
    for result in results:
        stats = result.stats
        if result.complete:
            continue
        kinds = ", ".join(f"{kind} ×{n}" for kind, n in stats.error_kinds.most_common())
        lines.append(
            f"[bold yellow]incomplete:[/] {terminal_text(result.config.name)}: {stats.errors} of "
            f"{stats.calls} call(s) failed ({kinds}); details in {terminal_text(result.out_dir / 'report.md')}"
        )
        lines += [
            f"  {kind}: {terminal_text(message)}" for kind, message in stats.first_errors.items()
        ]
    lines.append(
        "Re-run the same command to retry the failed calls "
        "(answers already received come from the cache)."
    )
    return lines


# The commands in the order of a study: run, look, compare; then the other tools.
for command in (run, runs, report, view, compare, plan, merge, evaluate, tag):
    app.command()(command)
app.command("list")(list_)
app.command()(annotate)


@app.command(hidden=True)
def providers() -> None:
    """`harness list providers`, by its name before 0.3."""
    list_("providers")


def _warning_text(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    line: str | None = None,
) -> str:
    """A deprecated setting or a broken plugin as one line; other warnings as Python
    shows them."""
    if issubclass(category, DeprecatedSetting | PluginWarning):
        return f"warning: {message}\n"
    return _python_warning_text(message, category, filename, lineno, line)


_python_warning_text = warnings.formatwarning


def main() -> None:
    """The `harness` script."""
    warnings.formatwarning = _warning_text
    try:
        sys.exit(app())
    except KeyboardInterrupt:  # before a command handles it (typer building the commands)
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    except SystemExit as exc:  # typer ends a command Ctrl-C interrupts with 130, silently
        if exc.code == 130 and 130 not in interruptions_reported:
            sys.stderr.write("interrupted\n")
        raise


if __name__ == "__main__":
    main()
