"""What every `harness` subcommand shares: the consoles, the exit codes, and the wrapper that
turns an input error into one line and exit code 2."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

import typer
from rich.markup import escape

from harness.console import terminal
from harness.errors import HarnessError

console = terminal()
err_console = terminal(stderr=True)
F = TypeVar("F", bound=Callable[..., Any])

EXIT_INCOMPLETE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def user_errors(func: F) -> F:
    """Print input errors as one line (no traceback) and exit with code 2."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (HarnessError, ImportError) as exc:
            err_console.print(
                f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True
            )
            raise typer.Exit(EXIT_USAGE) from None

    return wrapper  # type: ignore[return-value]
