"""User-facing errors: each renders as one line naming where the problem is and why."""

from __future__ import annotations

from pathlib import Path


class HarnessError(Exception):
    """An error caused by user input; the CLI prints it as one line and exits with code 2."""


class DeprecatedSetting(FutureWarning):
    """A setting still read, under a newer spelling: the CLI prints it as one line."""


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


class StorageError(HarnessError):
    """The response cache or a results folder cannot be used (damaged, full disk, not a
    folder): one line saying where and what to do."""
