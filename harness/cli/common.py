"""What every `harness` subcommand shares: the consoles, the exit codes, the wrapper that
turns an input error into one line and exit code 2, the version line, termination signals
handled like Ctrl-C, and the options several commands take."""

from __future__ import annotations

import secrets
import signal
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from typer.core import TyperGroup, TyperOption

from harness._version import __version__
from harness.core.console import terminal
from harness.core.errors import DeprecatedSetting, HarnessError
from harness.core.provenance import git_commit
from harness.core.sanitize import terminal_text
from harness.core.secrets import scrub

console = terminal()
err_console = terminal(stderr=True)
F = TypeVar("F", bound=Callable[..., Any])

EXIT_INCOMPLETE = 1
EXIT_USAGE = 2


def user_errors(func: F) -> F:
    """Print input errors as one line (no traceback) and exit with code 2."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (HarnessError, ImportError) as exc:
            for line in scrub(str(exc)).splitlines() or [""]:  # several mistakes: one line each
                err_console.print(
                    f"[bold red]error:[/] {terminal_text(line)}", highlight=False, soft_wrap=True
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


class HarnessGroup(TyperGroup):
    """A command group whose own --help flag defaults to False, not None: typer (0.29)
    coerces a flag whose value is None through a pydantic adapter, and the group's flag is
    None whenever a subcommand is named, so `harness NAME --help` imported pydantic. It
    accepts `--no-overwrite` (construct's default, spelt out before 0.3) with a warning."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if "--no-overwrite" in args:
            warnings.warn("--no-overwrite is the default: leave it out", DeprecatedSetting, 2)
            args = [arg for arg in args if arg != "--no-overwrite"]
        return super().parse_args(ctx, args)

    def get_help_option(self, ctx: Any) -> TyperOption | None:
        option = super().get_help_option(ctx)
        if option is not None:
            option.default = False
        return option


def check_range(option: str, value: int, low: int, high: int | None = None) -> None:
    """One input-error line when a numeric option is out of its range."""
    if value < low or (high is not None and value > high):
        bounds = f"from {low:,} to {high:,}" if high is not None else f"at least {low:,}"
        raise HarnessError(f"{option} must be {bounds}, not {value:,}")


TERMINATION_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
_received: list[int] = []
interruptions_reported: list[int] = []  # the exit codes `resumable` has explained


def _as_ctrl_c(signum: int, frame: object) -> None:
    _received.append(signum)
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:  # e.g. a background job
        raise KeyboardInterrupt
    signal.raise_signal(signal.SIGINT)  # asyncio then cancels the run as on Ctrl-C


@contextmanager
def resumable() -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP end the block alike (every call cancelled cleanly): one line
    saying how to resume, then exit 128 + the signal (130 for Ctrl-C, 143 SIGTERM, 129 SIGHUP)."""
    _received.clear()
    previous = {sent: signal.signal(sent, _as_ctrl_c) for sent in TERMINATION_SIGNALS}
    try:
        yield
    except KeyboardInterrupt:
        received = signal.Signals(_received[-1] if _received else signal.SIGINT)
        label = "" if received == signal.SIGINT else f" ({received.name})"
        err_console.print(
            f"[bold yellow]interrupted{label}:[/] re-run the same command to resume "
            "(every answer received so far is in the cache)"
        )
        interruptions_reported.append(128 + received)
        raise typer.Exit(128 + received) from None
    finally:
        for sent, handler in previous.items():
            signal.signal(sent, handler)


def warn(lines: Iterable[str]) -> None:
    for line in lines:
        err_console.print(
            f"[bold yellow]warning:[/] {terminal_text(line)}", highlight=False, soft_wrap=True
        )


def access_token(token: str | None, local: bool) -> str | None:
    """The token a served page asks for: the one given, else none on this machine only and
    a random one beyond it (then a note says so)."""
    if local:
        return token
    console.print(
        "[bold yellow]note:[/] listening beyond this machine: only links with the token "
        "get in; use HTTPS in front of it (a reverse proxy) on an open network",
        highlight=False,
    )
    return token or secrets.token_urlsafe(12)


CacheDirOption = Annotated[
    Path | None,
    typer.Option(help="Response cache directory [default: $BGM_JUDGE_CACHE or .cache/responses]."),
]
