"""Deterministic file writing shared by the stages: same content in, same bytes out."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError

MARKER = "build.json"  # written last into a built dataset; marks a folder we may replace


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> int:
    """Write one JSON object per line (atomically); returns the number of lines."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    count = 0
    with tmp.open("w", encoding="utf-8", newline="\n") as handle:
        for row in rows:
            handle.write(dumps(row) + "\n")
            count += 1
    os.replace(tmp, path)
    return count


def write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(value, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def prepare_out_dir(out_dir: Path, *, overwrite: bool) -> None:
    """An empty `out_dir`; a non-empty one is replaced only if a build wrote it."""
    if out_dir.exists() and any(out_dir.iterdir()):
        if not (overwrite and (out_dir / MARKER).is_file()):
            raise HarnessError(
                f"{out_dir} is not empty (pass --overwrite to replace a dataset built here)"
            )
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
