"""`harness report`, `harness runs`, `harness view` and `harness merge`: what a user does with
finished runs (and shards of one) and their own predictions."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from harness.cli.common import access_token, console, user_errors, warn
from harness.core.errors import HarnessError
from harness.core.sanitize import terminal_text

RUNS_HELP = (
    "Run folders, sweep folders (searched at any depth), predictions JSONL files, or folders "
    "holding only predictions.jsonl."
)


@user_errors
def report(
    runs: Annotated[list[Path], typer.Argument(help=RUNS_HELP)],
    out: Annotated[
        Path | None,
        typer.Option(help="Folder for the report files [default: RUN when only one is given]."),
    ] = None,
    baseline: Annotated[
        Path | None,
        typer.Option(help="Run (or predictions file) to compare every run against."),
    ] = None,
    pair_by: Annotated[
        str | None,
        typer.Option(
            help="Compare each run with its own baseline: the run that differs only in this "
            "setting, e.g. prompt=zero_shot (each model's CoT run against its zero-shot run)."
        ),
    ] = None,
    correction: Annotated[
        Literal["holm", "bh", "none"],
        typer.Option(help="Adjust the paired p-values for their number."),
    ] = "holm",
    dataset: Annotated[
        Path | None,
        typer.Option(
            help="Dataset folder, if not where the runs' config.yaml says (predictions files "
            "need it unless a run folder names the dataset)."
        ),
    ] = None,
    qrels: Annotated[
        Path | None,
        typer.Option(
            help="TREC qrels instead of --dataset, for TREC run files: each query is an item, "
            "the documents the runs rank its candidates (written to OUT/qrels_dataset)."
        ),
    ] = None,
    html: Annotated[bool, typer.Option(help="Write the HTML report (report.html).")] = True,
    embed_audio: Annotated[
        bool,
        typer.Option(
            help="Embed the audio in report.html (compressed, each clip once; else linked "
            "relative to it)."
        ),
    ] = False,
    n_permutations: Annotated[
        int, typer.Option(help="Sign-flip permutations for paired p-values.")
    ] = 10000,
    seed: Annotated[int, typer.Option(help="Seed of the paired bootstrap and permutations.")] = 0,
    score: Annotated[
        Literal["greedy", "expected"],
        typer.Option(
            help="Which scores the metrics and paired statistics use: greedy (the answers) "
            "or expected (the judges' probability-weighted scores, where a run has them)."
        ),
    ] = "greedy",
) -> None:
    """Compare finished runs and your own predictions: metrics with CIs, coverage, tie and
    parse-failure rates, calls, tokens and cost; LaTeX tables and a model x prompt pivot;
    paired differences against --baseline or --pair-by (bootstrap CI, sign-flip p, adjusted
    for many p-values); agreement between runs and the human ranking; position bias of joint
    prompts; figures (PNG and PDF); and an HTML report with a dialogue browser."""
    from harness.reports.paired_tables import paired_rich_table
    from harness.reports.tables import comparison_rich_table
    from harness.runs.reporting import NothingToReport, source_title
    from harness.runs.reporting import report as make_report

    if out is None:
        if len(runs) != 1:
            raise HarnessError("give --out DIR when comparing runs from several folders")
        out = runs[0].parent if runs[0].is_file() else runs[0]
    try:
        made = make_report(
            runs,
            out=out,
            baseline=baseline,
            pair_by=pair_by,
            correction=correction,
            dataset=dataset,
            qrels=qrels,
            html=html,
            embed_audio=embed_audio,
            n_permutations=n_permutations,
            seed=seed,
            score=score,
        )
    except NothingToReport as exc:
        warn(exc.warnings)  # each skipped run, then the one error line
        raise HarnessError(exc.headline) from None
    warn(made.warnings)
    console.print(comparison_rich_table(source_title(runs), made.loaded, made.analysis.human))
    if made.analysis.paired:
        console.print(paired_rich_table(made.analysis))
    names = terminal_text(", ".join(p.name for p in made.files))
    console.print(f"[dim]wrote {names} to {terminal_text(out)}/[/]")


def _mean(metrics: Mapping[str, Any], name: str) -> str:
    value = (metrics.get("metrics") or {}).get(name) or {}
    mean = value.get("mean") if isinstance(value, Mapping) else None
    return "n/a" if mean is None else f"{mean:.3f}"


@user_errors
def runs(
    folders: Annotated[
        list[Path] | None, typer.Argument(help="Results folders [default: results].")
    ] = None,
) -> None:
    """List the finished runs under the folders (sweeps at any depth, in the experiment's
    order) with their key figures: setup, items, the ranking metrics (Hit@1, MRR, nDCG,
    tau-b), coverage, failed calls, when they finished, and a dagger where the endpoint was
    not the provider's official one."""
    from rich.table import Table

    from harness.core.provenance import drifted_packages, unofficial_endpoints
    from harness.core.run_files import read_or_empty
    from harness.reports.formatting import percent
    from harness.reports.sources import discover
    from harness.scoring import registry
    from harness.scoring.evaluation import no_scores_reason
    from providers import REGISTRY

    roots = folders or [Path("results")]
    found = discover(roots)
    warn(found.warnings)
    if not found.sources:
        raise HarnessError(f"no finished runs under {', '.join(map(str, roots))}")
    names = registry.names("ranking")
    table = Table("run", "setup", "items", *map(registry.label, names))
    for column in ("coverage", "failed", "finished"):
        table.add_column(column)
    table.columns[0].overflow = table.columns[1].overflow = "fold"

    def shown(path: Path) -> str:
        for root in roots:
            if path.is_relative_to(root) and path != root:
                return terminal_text(str(path.relative_to(root)))
        return terminal_text(str(path))

    marks: set[str] = set()
    for source in found.sources:
        if source.kind == "predictions":
            table.add_row(shown(source.path), "your predictions (harness report scores them)")
            continue
        metrics = read_or_empty(source.path / "metrics.json")
        config = read_or_empty(source.path / "config.yaml")
        stats = read_or_empty(source.path / "run.json")
        provider = config.get("provider") or {}
        inputs = config.get("inputs") or {}
        entry = REGISTRY.get(str(provider.get("name")))
        setup = " · ".join(
            str(part)
            for part in (
                provider.get("label") or provider.get("name"),
                provider.get("model"),
                config.get("prompt") if entry is None or entry.kind == "judge" else None,
                f"{inputs.get('dialogue', 'full')}/{inputs.get('music', 'audio')}",
            )
            if part
        )
        mark = (" †" if unofficial_endpoints(stats) else "") + (
            " ‡" if drifted_packages(stats) else ""
        )
        marks |= set(mark.split())
        failed = no_scores_reason(metrics, stats)  # chance-level numbers are not shown
        figures = [_mean(metrics, name) for name in names]
        if failed is not None:
            figures = ["no metrics"] + ["-"] * (len(names) - 1)
            setup += f" ({failed})"
        finished = str((stats.get("provenance") or {}).get("finished_at") or "?")
        table.add_row(
            shown(source.path) + mark,
            terminal_text(setup),
            str(metrics.get("n_items", "?")),
            *figures,
            percent(metrics.get("coverage")),
            f"{stats.get('errors', '?')}/{stats.get('calls', '?')}",
            finished.replace("T", " ")[:16],
        )
    console.print(table)
    if "†" in marks:
        console.print("† endpoint is not the provider's official service (see the run's report.md)")
    if "‡" in marks:
        console.print(
            "‡ made in an environment that differs from the lock (see the run's report.md)"
        )


@user_errors
def view(
    runs: Annotated[
        list[Path] | None, typer.Argument(help=RUNS_HELP + " [default: results]")
    ] = None,
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 7575,
    host: Annotated[
        str, typer.Option(help="Address to bind (127.0.0.1: this machine only).")
    ] = "127.0.0.1",
    dataset: Annotated[
        Path | None, typer.Option(help="Dataset folder, if not where the runs' config.yaml says.")
    ] = None,
    open_browser: Annotated[
        bool, typer.Option("--open", help="Open the page in the default browser.")
    ] = False,
    token: Annotated[
        str | None,
        typer.Option(
            help="Access token every request must carry (?token=, then a cookie) "
            "[default: none on 127.0.0.1, a random one on any other --host]."
        ),
    ] = None,
) -> None:
    """Serve the HTML report of the runs, live: every page load re-reads the results that
    changed, and an open page offers a reload when a run finishes. Ctrl+C stops."""
    from harness.reports.server import LiveReport, is_loopback, serve

    token = access_token(token, is_loopback(host))
    report = LiveReport(runs or [Path("results")], dataset=dataset)
    try:
        server = serve(report, host, port, token=token)
    except OSError as exc:
        raise HarnessError(f"cannot listen on {host}:{port} ({exc.strerror or exc})") from None
    url = f"http://{host}:{server.server_address[1]}/" + (f"?token={token}" if token else "")
    console.print(
        f"serving the report of {terminal_text(', '.join(map(str, report.paths)))} at {url} "
        "(Ctrl+C stops)",
        highlight=False,
    )
    if open_browser:
        import webbrowser

        webbrowser.open(url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


@user_errors
def merge(
    shards: Annotated[
        list[Path],
        typer.Argument(help="The shards' run folders (NAME.shard-I-of-N/), every I of 0..N-1."),
    ],
    out: Annotated[Path, typer.Option(help="The whole run's folder to write (e.g. results/NAME).")],
    overwrite: Annotated[
        bool,
        typer.Option(
            "--overwrite",
            help="Replace a finished run of another configuration in --out (otherwise refused).",
        ),
    ] = False,
) -> None:
    """Join the shards of `harness run EXP --shard I/N` into one run folder: records.jsonl,
    metrics.json and report.md as the unsharded run writes them, run.json with the shards'
    counts added up. Refused, naming the file, for shards of different configurations,
    overlapping or missing shards, records that are not the ones a shard's run.json counts, a
    dataset whose items changed since they ran, or templates edited between them; a shard of
    another harness version is a warning."""
    from harness.runs.merge import merge_shards

    merged = merge_shards(shards, out, overwrite=overwrite)
    warn(merged.warnings)
    console.print(
        f"merged {merged.shards} shard(s): {merged.records} records of {merged.items} items "
        f"in {merged.out}/ (records.jsonl, metrics.json, report.md)",
        highlight=False,
    )
