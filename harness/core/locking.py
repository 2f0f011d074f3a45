"""One process at a time per run folder: an exclusive lock on `.lock` inside it, which the
operating system drops when its process ends, however it ends (never a stale lock)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import time
from pathlib import Path
from typing import IO

from harness.core.errors import StorageError

LOCK_NAME = ".lock"


def make_folder(folder: Path, what: str) -> None:
    """mkdir -p, with one line when a file is in the way or the folder cannot be made."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocker = next((p for p in [folder, *folder.parents] if p.is_file()), folder)
        raise StorageError(f"{what} {folder}: {blocker} is a file, not a folder") from None
    except OSError as exc:
        raise StorageError(f"{what} {folder}: {exc.strerror or exc}") from None


class RunFolderLock:
    """Held from `acquire` until `release`; a second holder is refused, naming the first."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.created = False
        self._handle: IO[str] | None = None

    def acquire(self) -> RunFolderLock:
        self.created = not self.folder.is_dir()
        make_folder(self.folder, "results folder")
        handle = (self.folder / LOCK_NAME).open("a+", encoding="utf-8")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            raise StorageError(
                f"{self.folder} is being written by {holder}: wait until it ends, or give "
                "this run another --results-dir"
            ) from None
        handle.seek(0)
        handle.truncate()
        started = time.strftime("%Y-%m-%d %H:%M:%S")
        handle.write(f"process {os.getpid()} on {socket.gethostname()} (since {started})\n")
        handle.flush()
        self._handle = handle
        return self

    def release(self, *, failed: bool = False) -> None:
        """Let go; after a run that failed before writing anything, remove the folder it made."""
        if self._handle is None:
            return
        lock_file = self.folder / LOCK_NAME
        if failed and self.created and [p.name for p in self.folder.iterdir()] == [LOCK_NAME]:
            lock_file.unlink()
            with contextlib.suppress(OSError):
                self.folder.rmdir()
        else:
            self._handle.truncate(0)
        fcntl.flock(self._handle, fcntl.LOCK_UN)
        self._handle.close()
        self._handle = None
