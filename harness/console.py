"""Terminal output shared by the CLI and the runner."""

from __future__ import annotations

import sys

from rich.console import Console


def terminal(stderr: bool = False) -> Console:
    """A console that keeps tables readable when output goes to a file or a CI log."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, width=None if stream.isatty() else 160)
