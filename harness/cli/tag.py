"""`harness tag`: musicnn tags of audio files, one JSON line each."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from harness.cli.common import EXIT_INCOMPLETE, err_console, user_errors
from harness.core.errors import HarnessError, first_line
from harness.core.sanitize import terminal_text


@user_errors
def tag(
    files: Annotated[list[Path], typer.Argument(help="Audio files (any format librosa reads).")],
    model: Annotated[
        str, typer.Option(help="mtt (MagnaTagATune) or msd (Million Song Dataset), or a full name.")
    ] = "mtt",
) -> None:
    """Tag audio files with a pretrained musicnn model (offline, CPU): one JSON line per file,
    `{"file", "model", "tags": {tag: probability}}` with all 50 tags. A file that cannot be
    read gets one error line; the others are still tagged (exit code 1 if any failed)."""
    from providers.scorers.musicnn import MODELS, Tagger
    from providers.scorers.musicnn.features import load_audio

    names = {"mtt": "MTT_musicnn", "msd": "MSD_musicnn"}
    name = names.get(model.lower(), model)
    if name not in MODELS:
        raise HarnessError(f"--model must be mtt, msd or one of {', '.join(MODELS)}, not {model!r}")
    tagger = Tagger.load(name)
    failed = 0
    for path in files:
        try:
            samples = load_audio(path)
            if samples.size == 0:
                raise ValueError("no samples")
            (scores,) = tagger.tag([samples])
        except Exception as exc:  # one bad file never stops the others
            failed += 1
            reason = "file not found" if isinstance(exc, FileNotFoundError) else first_line(exc)
            err_console.print(
                f"[bold red]error:[/] {terminal_text(str(path))}: {terminal_text(reason)}",
                highlight=False,
                soft_wrap=True,
            )
            continue
        line = {
            "file": str(path),
            "model": name,
            "tags": {k: round(v, 6) for k, v in scores.items()},
        }
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()
    if failed:
        raise typer.Exit(EXIT_INCOMPLETE)
