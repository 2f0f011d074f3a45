"""User-facing errors: each renders as one line naming where the problem is and why."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from pathlib import Path

MAX_LINE = 1_000  # characters of an error line: what it quotes of data is cut in the middle


class HarnessError(Exception):
    """An error caused by user input; the CLI prints it as one line and exits with code 2.
    A line longer than MAX_LINE (it quotes a huge id, say) keeps its start and its end."""

    def __init__(self, *args: object) -> None:
        if len(args) == 1 and isinstance(args[0], str) and len(args[0]) > MAX_LINE:
            args = ("\n".join(map(_shortened, args[0].split("\n"))),)
        super().__init__(*args)


def _shortened(line: str) -> str:
    if len(line) <= MAX_LINE:
        return line
    cut = len(line) - MAX_LINE
    return f"{line[: MAX_LINE // 2]}...[{cut:,} characters]...{line[-MAX_LINE // 2 :]}"


def first_line(exc: BaseException) -> str:
    """An exception's first line, for a one-line error (its type's name when it has no text)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class DeprecatedSetting(FutureWarning):
    """A setting still read, under a newer spelling: the CLI prints it as one line."""


class PluginWarning(UserWarning):
    """An installed plugin that could not be loaded: the CLI prints it as one line."""


class DatasetError(HarnessError):
    def __init__(self, path: Path | str, line: int | None, reason: str) -> None:
        self.path, self.line, self.reason = path, line, reason
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {reason}")


class ConfigError(HarnessError):
    def __init__(self, path: Path | str, field: str | None, reason: str) -> None:
        self.path, self.field, self.reason = path, field, reason
        where = f"{path}: {field}" if field else str(path)
        super().__init__(f"{where}: {reason}")


class ConfigErrors(HarnessError):
    """Several ConfigErrors of one file, one line each (the CLI prints every line)."""

    def __init__(self, errors: Sequence[ConfigError]) -> None:
        self.errors = list(errors)
        super().__init__("\n".join(str(e) for e in self.errors))


def did_you_mean(key: str, known: Iterable[str]) -> str:
    """`; did you mean 'prompt'?` for the known name nearest to `key`, or nothing."""
    close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


class StorageError(HarnessError):
    """The response cache or a results folder cannot be used (damaged, full disk, not a
    folder): one line saying where and what to do."""
