"""`harness import`: one subcommand per benchmark release."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli.common import console, user_errors
from harness.core.sanitize import terminal_text

app = typer.Typer(
    help="Turn another benchmark's release into a dataset folder.",
    no_args_is_help=True,
    rich_markup_mode="markdown",
)


@app.command()
@user_errors
def musicrs(
    source: Annotated[
        str,
        typer.Argument(
            help="The MusiCRS JSONL (musicrs_100_candidates.jsonl), or the release as a Hugging "
            "Face dataset: hf://rohan2810/MusiCRS[@REVISION], a save_to_disk folder or Parquet."
        ),
    ],
    out: Annotated[Path, typer.Option(help="Dataset folder to write.")],
    audio: Annotated[
        Path | None,
        typer.Option(help="Folder of downloaded thread audio, one subfolder per thread name."),
    ] = None,
    only_with_audio: Annotated[
        bool, typer.Option(help="Keep only the threads that have audio under --audio.")
    ] = False,
    split: Annotated[
        str | None,
        typer.Option(help="Split of a Hugging Face dataset [default: its only split, or train]."),
    ] = None,
    overwrite: Annotated[
        bool,
        typer.Option("--overwrite", help="Replace a dataset imported into --out (only that)."),
    ] = False,
) -> None:
    """One item per Reddit thread: the query, the thread text, the subreddit as group, the
    candidate song titles as text-only clips and the gold titles as `relevant`."""
    from harness.interop.musicrs import import_musicrs

    summary = import_musicrs(
        source, out, audio=audio, only_with_audio=only_with_audio, split=split, overwrite=overwrite
    )
    console.print(
        f"[bold]MusiCRS[/] -> {terminal_text(out)}: {summary.n_items} items, {summary.n_clips} clips, "
        f"{summary.n_candidates} candidates, {summary.n_relevant} gold "
        f"({summary.n_items_without_relevant} items without gold, "
        f"{summary.n_items_with_audio} with context audio)",
        highlight=False,
        soft_wrap=True,
    )
    groups = ", ".join(f"{name} {n}" for name, n in summary.groups.most_common())
    console.print(f"  groups: {terminal_text(groups)}", highlight=False, soft_wrap=True)


@app.command()
@user_errors
def qrels(
    source: Annotated[Path, typer.Argument(help="TREC qrels (QID ITER DOCNO GAIN per line).")],
    candidates: Annotated[
        Path,
        typer.Option(help="The candidates of each query: QID DOCNO lines, or a TREC run file."),
    ],
    out: Annotated[Path, typer.Option(help="Dataset folder to write.")],
    queries: Annotated[
        Path | None, typer.Option(help="Query texts, QID<TAB>TEXT per line.")
    ] = None,
) -> None:
    """One item per query of --candidates: its documents as text-only candidates, its
    relevance from the qrels (binary gains as `relevant`, graded ones as `relevance`)."""
    from harness.core.locking import make_folder
    from harness.interop.qrels import import_qrels

    make_folder(out, "--out")
    summary = import_qrels(source, candidates, out, queries=queries)
    console.print(
        f"[bold]qrels[/] -> {terminal_text(out)}: {summary.n_items} items, {summary.n_clips} documents, "
        f"{summary.n_relevant} relevant; {summary.n_left_out} judged relevant documents are "
        f"not among their query's candidates (left out); {summary.n_without_candidates} "
        "judged queries have no candidates",
        highlight=False,
        soft_wrap=True,
    )
