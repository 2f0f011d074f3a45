"""`harness export`: runs in other tools' formats."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli.common import console, user_errors
from harness.core.errors import HarnessError
from harness.core.locking import make_folder

app = typer.Typer(
    help="Write runs in other tools' formats (TREC run + qrels, Parquet).",
    no_args_is_help=True,
    rich_markup_mode="markdown",
)
DATASET_HELP = "Dataset folder, if not where the run's config.yaml says."


@app.command()
@user_errors
def trec(
    run: Annotated[Path, typer.Argument(help="A finished run folder.")],
    out: Annotated[Path, typer.Option(help="Folder for run.trec, qrels.txt and README.md.")],
    dataset: Annotated[Path | None, typer.Option(help=DATASET_HELP)] = None,
) -> None:
    """The run as a TREC run file (ties broken by candidate order, as README.md in --out
    says) and the dataset's relevance as qrels, for trec_eval, pytrec_eval, ranx and
    ir-measures. The files agree with the harness's metrics where the run has no ties. A
    music-crs folder (a judge run, or `harness evaluate --protocol music-crs --out`): its
    submission's lists, in their order, and each turn's gold."""
    from harness.interop.trec_export import export_own_trec, export_trec
    from harness.reports.loading import load_run

    make_folder(out, "--out")
    written = export_own_trec(run, out, dataset) or export_trec(load_run(run, dataset=dataset), out)
    console.print(f"wrote {', '.join(p.name for p in written)} to {out}/", highlight=False)


@app.command()
@user_errors
def parquet(
    runs: Annotated[list[Path], typer.Argument(help="Run folders or sweep folders.")],
    out: Annotated[Path, typer.Option(help="Folder for records.parquet and items.parquet.")],
    dataset: Annotated[Path | None, typer.Option(help=DATASET_HELP)] = None,
) -> None:
    """Records (one row per model call and run) and per-item metrics (one row per item and
    run) as typed Parquet tables; `harness.load_run` reads records.parquet back."""
    from harness.core.dataset import Dataset
    from harness.interop.parquet import write_parquet
    from harness.reports.loading import load_run
    from harness.reports.sources import discover

    found = discover(runs)
    folders = [s.path for s in found.sources if s.kind == "run"]
    if not folders:
        raise HarnessError(f"no finished run folders under {', '.join(map(str, runs))}")
    make_folder(out, "--out")
    datasets: dict[Path, Dataset] = {}  # each dataset loaded once
    loaded = [load_run(folder, dataset=dataset, datasets=datasets) for folder in folders]
    written = write_parquet(loaded, out)
    console.print(f"wrote {', '.join(p.name for p in written)} to {out}/", highlight=False)
