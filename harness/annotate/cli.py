"""`harness annotate DATASET`: serve the annotation app, or export the rankings."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli_support import console, user_errors

DB_NAME = "annotations.sqlite"


@user_errors
def annotate(
    dataset: Annotated[Path, typer.Argument(help="Dataset folder (items.jsonl, clips.jsonl).")],
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    host: Annotated[
        str, typer.Option(help="Address to bind; 127.0.0.1 keeps it on this machine.")
    ] = "127.0.0.1",
    db: Annotated[
        Path | None, typer.Option(help=f"SQLite file of rankings (default: DATASET/{DB_NAME}).")
    ] = None,
    export: Annotated[
        bool,
        typer.Option(
            "--export", help="Write the stored rankings into DATASET/items.jsonl and exit."
        ),
    ] = False,
) -> None:
    """Rank each dialogue's candidate clips in the browser; every ranking is saved at once
    and annotators resume where they stopped. --export feeds the rankings to stage 4."""
    from aiohttp import web

    from harness.annotate.app import create_app
    from harness.annotate.export import export_annotations
    from harness.annotate.store import RankingStore
    from harness.dataset import load_dataset

    data = load_dataset(dataset)
    store = RankingStore(db or dataset / DB_NAME, data)
    try:
        if export:
            counts = export_annotations(dataset, store)
            console.print(
                f"exported {counts['rankings']} ranking(s) of {counts['items_with_annotations']}"
                f"/{counts['items']} item(s) by {len(counts['annotators'])} annotator(s) into "
                f"{dataset / 'items.jsonl'}",
                highlight=False,
            )
            return
        if host not in ("127.0.0.1", "localhost", "::1"):
            console.print(
                f"[bold yellow]warning:[/] listening on {host}: anyone who can reach it can "
                "submit rankings under any name (there are no passwords)"
            )
        console.print(
            f"annotating {dataset} ({len(data.items)} items); rankings go to {store.path}\n"
            f"open http://{host}:{port}/ (Ctrl+C stops)",
            highlight=False,
        )
        web.run_app(create_app(data, store), host=host, port=port, print=None)
    finally:
        store.close()
