"""Terminal output shared by the CLI and the runner, and a run's progress bar."""

from __future__ import annotations

import math
import sys
import time

from rich.console import Console


def terminal(stderr: bool = False) -> Console:
    """A console that keeps tables readable when output goes to a file or a CI log."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, width=None if stream.isatty() else 160)


class RunProgress:
    """A run's progress bar: calls done of how many, cached, failed and unparsable; drawn at
    most every `every` seconds."""

    def __init__(self, name: str, console: Console, *, show: bool, every: float = 0.1) -> None:
        # Imported here, not at the top: every command's start-up would pay for it, and only
        # runs draw a bar.
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        self.every = every
        self.count = 0
        self._shown_at = -math.inf  # the first call draws (the monotonic clock may be near 0)
        self._bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn(
                "cached {task.fields[hits]} · failed {task.fields[failed]} · unparsable {task.fields[bad]}"
            ),
            TimeRemainingColumn(),
            console=console,
            disable=not show,
        )
        self._task = self._bar.add_task(name, total=None, hits=0, failed=0, bad=0)

    def __enter__(self) -> RunProgress:
        self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._bar.stop()

    def total(self, calls: int) -> None:
        self._bar.update(self._task, total=calls)

    def done(self, hits: int, failed: int, bad: int) -> None:
        """One more call answered; the counts so far."""
        self.count += 1
        if (now := time.monotonic()) - self._shown_at >= self.every:
            self._shown_at = now
            self.show(hits, failed, bad)

    def show(self, hits: int, failed: int, bad: int) -> None:
        self._bar.update(self._task, completed=self.count, hits=hits, failed=failed, bad=bad)
