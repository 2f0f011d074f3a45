"""What every `harness` subcommand shares: the consoles, the exit codes, the wrapper that
turns an input error into one line and exit code 2, the version line, and help that shows
no value hint on flags that take none."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

import typer
from rich.markup import escape
from typer.core import TyperOption

from harness._version import __version__
from harness.console import terminal
from harness.errors import HarnessError
from harness.provenance import git_commit
from harness.secrets import scrub

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
                f"[bold red]error:[/] {escape(scrub(str(exc)))}", highlight=False, soft_wrap=True
            )
            raise typer.Exit(EXIT_USAGE) from None

    return wrapper  # type: ignore[return-value]


def version_text() -> str:
    """`bgm-judge 0.2.0`, with the commit when run from a git checkout."""
    git = git_commit()
    if git is None:
        return f"bgm-judge {__version__}"
    dirty = ", with local changes" if git["dirty"] else ""
    return f"bgm-judge {__version__} (git {git['commit'][:12]}{dirty})"


_display_type = TyperOption.display_type_rich


def _no_hint_on_flags(self: TyperOption, ctx: Any) -> str | None:
    # Typer's help prints "<bool>" beside --dry-run, --help and --x/--no-x, as if they took
    # a value; a flag takes none, so it gets no hint.
    return None if self.is_flag else _display_type(self, ctx)


TyperOption.display_type_rich = _no_hint_on_flags  # type: ignore[method-assign]


def check_range(option: str, value: int, low: int, high: int | None = None) -> None:
    """One input-error line when a numeric option is out of its range."""
    if value < low or (high is not None and value > high):
        bounds = f"from {low:,} to {high:,}" if high is not None else f"at least {low:,}"
        raise HarnessError(f"{option} must be {bounds}, not {value:,}")
