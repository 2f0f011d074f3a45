"""`harness cache export` and `harness cache import`: answers carried between machines as one
portable file (`harness.calls.portable_cache`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli.common import CacheDirOption, console, user_errors
from harness.core.errors import HarnessError
from harness.core.locking import make_folder

app = typer.Typer(
    help="Carry cached answers between machines: export them to one portable file, import "
    "that file into another cache.",
    no_args_is_help=True,
    rich_markup_mode="markdown",
)


@app.command("export")
@user_errors
def export(
    out: Annotated[Path, typer.Argument(help="The file to write (e.g. answers.jsonl.gz).")],
    run: Annotated[
        list[Path] | None,
        typer.Option(
            help="A finished run folder (or a sweep folder: every run under it) whose answers "
            "to export; repeatable.",
        ),
    ] = None,
    all_: Annotated[bool, typer.Option("--all", help="Export every answer of the cache.")] = False,
    cache_dir: CacheDirOption = None,
) -> None:
    """Write the answers a run used (`--run`) or the whole cache (`--all`) to one portable
    file (gzip JSON lines, docs/formats.md) that `harness cache import` reads on another
    machine."""
    from harness.calls.cache import ResponseCache  # here: `harness --help` needs no pydantic
    from harness.calls.portable_cache import export_cache

    if bool(run) == all_:
        raise HarnessError("give --run RUN (repeatable) or --all, not both or neither")
    if out.is_dir():
        raise HarnessError(f"{out} is a folder: give the path of the file to write")
    keys = None if all_ else sorted({key for folder in run or [] for key in _keys_under(folder)})
    _existing(cache_dir)
    make_folder(out.parent, "OUT")
    cache = ResponseCache(cache_dir)
    try:
        done = export_cache(cache, out, keys)
    finally:
        cache.close()
    console.print(f"exported {done.written} answer(s) to {out}", highlight=False)
    if done.missing:
        console.print(
            f"[yellow]{done.missing} answer(s) the run(s) used are not in {cache.directory}[/] "
            "(another cache answered them, or it was moved): run again to fetch them",
            highlight=False,
        )


def _keys_under(folder: Path) -> list[str]:
    from harness.calls.portable_cache import KEYS_FILE, run_keys

    if not folder.is_dir():
        raise HarnessError(f"--run {folder}: no such folder")
    if (folder / KEYS_FILE).is_file() or (folder / "config.yaml").is_file():
        return run_keys(folder)
    found = sorted(folder.rglob(KEYS_FILE))
    if not found:
        raise HarnessError(f"--run {folder}: no finished run in it (no {KEYS_FILE})")
    return [key for path in found for key in run_keys(path.parent)]


def _existing(cache_dir: Path | None) -> None:
    """An export reads a cache: a misspelt --cache-dir is an error, not a new empty cache."""
    if cache_dir is not None and not (cache_dir / "cache.db").is_file():
        raise HarnessError(f"--cache-dir {cache_dir}: not a response cache (no cache.db)")


@app.command("import")
@user_errors
def import_(
    files: Annotated[list[Path], typer.Argument(help="Files written by `harness cache export`.")],
    cache_dir: CacheDirOption = None,
) -> None:
    """Add portable files' answers to the cache; an answer the cache holds already is kept
    as it is (never replaced). Each file is checked whole first: a damaged one adds nothing
    (and stops the import there, the files before it imported)."""
    from harness.calls.cache import ResponseCache
    from harness.calls.portable_cache import import_cache

    cache = ResponseCache(cache_dir)
    try:
        for file in files:
            done = import_cache(cache, file)
            console.print(
                f"{file}: imported {done.added} new answer(s) into {cache.directory}; "
                f"{done.kept} were there already (kept)",
                highlight=False,
            )
    finally:
        cache.close()
