"""Every mistake of an experiment file at once, each on one line with its line number: an
unknown top-level key with the nearest known one (`promt` -> did you mean `prompt`?), and
every field pydantic refuses."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from harness.core.errors import ConfigError, HarnessError


class ConfigErrors(HarnessError):
    """Several ConfigErrors of one file, one line each (the CLI prints every line)."""

    def __init__(self, errors: Sequence[ConfigError]) -> None:
        self.errors = list(errors)
        super().__init__("\n".join(str(e) for e in self.errors))


def raise_all(errors: Sequence[ConfigError]) -> None:
    """Raise the errors found, if any: one as itself, several together in file order."""
    errors = sorted(errors, key=_line)
    if len(errors) == 1:
        raise errors[0] from None
    if errors:
        raise ConfigErrors(errors) from None


def _line(error: ConfigError) -> int:
    found = re.match(r"line (\d+)", error.field or "")
    return int(found.group(1)) if found else 0


def suggestion(key: str, known: Iterable[str]) -> str:
    """`; did you mean 'prompt'?` for the known name nearest to `key`, or nothing."""
    close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def where(loc: Sequence[Any], lines: Mapping[tuple[str, ...], int]) -> str:
    """`line 5: prompt` for a field path, using the line of its longest known prefix."""
    path = tuple(str(p) for p in loc)
    field = ".".join(path) or "(top level)"
    for end in range(len(path), 0, -1):
        if path[:end] in lines:
            return f"line {lines[path[:end]]}: {field}"
    return field


def unknown_keys(
    raw: Mapping[str, Any],
    known: Iterable[str],
    source: Path | str,
    lines: Mapping[tuple[str, ...], int],
) -> list[ConfigError]:
    """One error per top-level key the file's kind (single run or sweep) does not take."""
    allowed = set(known)
    return [
        ConfigError(source, where([key], lines), "unknown key" + suggestion(str(key), allowed))
        for key in raw
        if str(key) not in allowed
    ]


def validation_errors(
    exc: ValidationError, source: Path | str, lines: Mapping[tuple[str, ...], int]
) -> list[ConfigError]:
    """One error per problem pydantic found, in file order."""
    found = []
    for error in exc.errors():
        reason = error["msg"].removeprefix("Value error, ")
        found.append(ConfigError(source, where(error["loc"], lines), reason))
    return found


def located(error: ConfigError, lines: Mapping[tuple[str, ...], int]) -> ConfigError:
    """The error with the line of its field (`prompt` -> `line 4: prompt`) when known."""
    if not error.field or error.field.startswith("line "):
        return error
    return ConfigError(error.path, where(error.field.split("."), lines), error.reason)
