"""`harness annotate DATASET`: serve the annotation app, or export the rankings."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Annotated

import typer

from harness.cli.common import access_token, console, user_errors
from harness.core.errors import HarnessError
from harness.core.sanitize import terminal_text

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
            "--export",
            help="Write the dataset with the stored rankings (annotations) to --out and exit.",
        ),
    ] = False,
    out: Annotated[
        Path | None,
        typer.Option(help="Folder --export writes (never the dataset itself)."),
    ] = None,
    guidelines: Annotated[
        Path | None,
        typer.Option(help="Text file of guidelines shown first [default: built-in ones]."),
    ] = None,
    practice: Annotated[
        Path | None,
        typer.Option(
            help="Dataset folder of practice items, ranked before the task (their reference "
            "ranking is shown as feedback; practice rankings are never exported)."
        ),
    ] = None,
    min_listen: Annotated[
        float,
        typer.Option(help="Seconds of a clip to play before it can be ranked (or to its end)."),
    ] = 10.0,
    token: Annotated[
        str | None,
        typer.Option(
            help="Access token every annotator's link must carry [default: none on "
            "127.0.0.1, a random one on any other address]."
        ),
    ] = None,
    admin_key: Annotated[
        str | None, typer.Option(help="Key of the /admin progress page [default: random].")
    ] = None,
    completion_code: Annotated[
        str | None,
        typer.Option(
            help="The code finished annotators are shown (a platform's study code) [default: "
            "one per annotator, listed on /admin]."
        ),
    ] = None,
    completion_url: Annotated[
        str | None,
        typer.Option(help="Link shown when finished; {code} is replaced by the code."),
    ] = None,
) -> None:
    """Rank each dialogue's candidate clips in the browser: guidelines and practice items
    first, each clip played before it is ranked, every ranking saved at once; annotators
    resume where they stopped. --export --out DIR feeds the rankings to stage 4."""
    from aiohttp import web

    from harness.construct.annotate.export import export_annotations
    from harness.construct.annotate.store import RankingStore
    from harness.construct.annotate.study import (
        DEFAULT_GUIDELINES,
        LOCAL_HOSTS,
        Study,
        create_study_app,
    )
    from harness.core.dataset import load_dataset

    if export and out is None:
        raise HarnessError(
            "--export needs --out DIR (the dataset's items.jsonl is never rewritten)"
        )
    data = load_dataset(dataset)
    store = RankingStore(db or dataset / DB_NAME, data)
    try:
        if export:
            assert out is not None
            counts = export_annotations(dataset, store, out)
            console.print(
                f"exported {counts['rankings']} ranking(s) of {counts['items_with_annotations']}"
                f"/{counts['items']} item(s) by {len(counts['annotators'])} annotator(s) into "
                f"{terminal_text(out / 'items.jsonl')}",
                highlight=False,
            )
            return
        study = Study(
            guidelines=_read_text(guidelines) if guidelines else DEFAULT_GUIDELINES,
            practice=load_dataset(practice) if practice else None,
            min_listen_s=min_listen,
            token=access_token(token, host in LOCAL_HOSTS),
            admin_key=admin_key or secrets.token_urlsafe(12),
            completion_code=completion_code,
            completion_url=completion_url,
        )
        link = f"http://{host}:{port}/" + (f"?token={study.token}" if study.token else "")
        console.print(
            f"annotating {terminal_text(dataset)} ({len(data.items)} items); rankings go to "
            f"{terminal_text(store.path)}\n"
            f"annotators open {link}\n"
            f"progress: http://{host}:{port}/admin?key={study.admin_key} (Ctrl+C stops)",
            highlight=False,
            soft_wrap=True,
        )
        web.run_app(create_study_app(data, store, study), host=host, port=port, print=None)
    finally:
        store.close()


def _read_text(path: Path) -> str:
    from harness.core.files import read_text

    return read_text(path, missing="guidelines file not found").strip()
