"""Paths that come from data kept inside the folder they belong to: the one check on the path
as written (relative, no `..`, NUL byte or drive; `/` and `\\` both separators). A symbolic
link inside the folder is followed (the owner's choice)."""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

_DRIVE = re.compile(r"^[A-Za-z]:")


class UnsafePath(ValueError):
    """A path from data that would leave its folder."""


def inside(relative: str, what: str = "path") -> PurePosixPath:
    """`relative` as a path that stays inside whatever folder it is joined to; UnsafePath
    (a ValueError, so a pydantic validator reports it with its line) otherwise."""
    return PurePosixPath(*_safe_parts(relative, what))


def _safe_parts(relative: str, what: str) -> list[str]:
    if not isinstance(relative, str) or not relative.strip():
        raise UnsafePath(f"{what} is empty")
    if "\x00" in relative:
        raise UnsafePath(f"{what} {relative!r} holds a NUL byte")
    unified = relative.replace("\\", "/")
    if unified.startswith("/") or _DRIVE.match(unified):
        raise UnsafePath(f"{what} {relative!r} is absolute; give it relative to the folder")
    parts = [part for part in unified.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise UnsafePath(f"{what} {relative!r} leaves the folder (..)")
    if not parts:
        raise UnsafePath(f"{what} {relative!r} names the folder itself")
    return parts


def contained(root: Path, relative: str, what: str = "path") -> Path:
    """`root / relative`, when `relative` stays inside `root` (`inside`); UnsafePath else."""
    return root.joinpath(*_safe_parts(relative, what))
