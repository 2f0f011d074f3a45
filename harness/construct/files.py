"""Deterministic file writing shared by the stages: same content in, same bytes out."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError
from harness.core.files import write_atomic

MARKER = "build.json"  # written last into a built dataset; marks a folder we may replace


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def write_json(path: Path, value: Any) -> None:
    write_atomic(path, json.dumps(value, ensure_ascii=False, indent=2) + "\n")


def prepare_out_dir(out_dir: Path, *, overwrite: bool) -> None:
    """An empty `out_dir`; a non-empty one is replaced only if a build wrote it."""
    if out_dir.exists() and any(out_dir.iterdir()):
        if not (overwrite and (out_dir / MARKER).is_file()):
            raise HarnessError(
                f"{out_dir} is not empty (pass --overwrite to replace a dataset built here)"
            )
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)


def link_or_copy(source: Path, target: Path) -> None:
    """`target` as a hard link to `source` where the file system allows, else a copy."""
    if target.exists() and target.samefile(source):
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    target.unlink(missing_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)
