"""What every `harness` subcommand shares: the consoles, the exit codes, the wrapper that
turns an input error into one line and exit code 2, the version line, help that shows
no value hint on flags that take none, termination signals handled like Ctrl-C, and the
group class and lean app that let a command start without building the others."""

from __future__ import annotations

import copy
import inspect
import signal
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import wraps
from typing import Any, TypeVar

import typer
from typer.core import TyperGroup, TyperOption
from typer.main import get_command_name
from typer.models import CommandInfo, TyperInfo

from harness._version import __version__
from harness.core.console import terminal
from harness.core.errors import HarnessError
from harness.core.provenance import git_commit
from harness.core.sanitize import terminal_text
from harness.core.secrets import scrub

console = terminal()
err_console = terminal(stderr=True)
F = TypeVar("F", bound=Callable[..., Any])

EXIT_INCOMPLETE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT; SIGTERM and SIGHUP exit with 128 + their number


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


_display_type = TyperOption.display_type_rich


def _no_hint_on_flags(self: TyperOption, ctx: Any) -> str | None:
    # Typer's help prints "<bool>" beside --dry-run, --help and --x/--no-x, as if they took
    # a value; a flag takes none, so it gets no hint.
    return None if self.is_flag else _display_type(self, ctx)


TyperOption.display_type_rich = _no_hint_on_flags  # type: ignore[method-assign]


class HarnessGroup(TyperGroup):
    """A command group whose own --help flag defaults to False, not None: typer (0.29)
    coerces a flag whose value is None through a pydantic adapter, and the group's flag is
    None whenever a subcommand is named, so `harness run --help` imported pydantic for it
    (a sixth of its start-up)."""

    def get_help_option(self, ctx: Any) -> TyperOption | None:
        option = super().get_help_option(ctx)
        if option is not None:
            option.default = False
        return option


def only_the_named_command(app: typer.Typer, args: Sequence[str]) -> typer.Typer:
    """`app` with only what the invocation `args` needs: typer builds every registered
    command's parameters before it parses (a hundred milliseconds for `harness`'s).

    - `NAME ...`: the command or group NAME alone;
    - nothing, -h, --help or --version: every command and group, each with its help but
      without its parameters or subcommands (the listing shows their names and help only);
    - anything else (an unknown name, whose error suggests one): `app` itself."""
    if not args or args[0] in ("-h", "--help", "--version"):
        return _lean(
            app,
            [_without_parameters(info) for info in app.registered_commands],
            [_without_subcommands(info) for info in app.registered_groups],
        )
    commands = [info for info in app.registered_commands if _name(info) == args[0]]
    groups = [info for info in app.registered_groups if info.name == args[0]]
    return _lean(app, commands, groups) if commands or groups else app


def _lean(app: typer.Typer, commands: list[CommandInfo], groups: list[TyperInfo]) -> typer.Typer:
    lean = copy.copy(app)  # the same settings, callback and group class
    lean.registered_commands, lean.registered_groups = commands, groups
    return lean


def _name(info: CommandInfo) -> str | None:
    return info.name or (info.callback and get_command_name(info.callback.__name__))


def _without_parameters(info: CommandInfo) -> CommandInfo:
    lean = copy.copy(info)
    lean.name, lean.callback = _name(info), _takes_nothing
    lean.help = info.help if info.help is not None else inspect.getdoc(info.callback)
    return lean


def _takes_nothing() -> None:
    raise AssertionError("only listed, never run")  # pragma: no cover


def _without_subcommands(info: TyperInfo) -> TyperInfo:
    assert info.typer_instance is not None
    lean = copy.copy(info)
    lean.typer_instance = _lean(info.typer_instance, [], [])
    return lean


def check_range(option: str, value: int, low: int, high: int | None = None) -> None:
    """One input-error line when a numeric option is out of its range."""
    if value < low or (high is not None and value > high):
        bounds = f"from {low:,} to {high:,}" if high is not None else f"at least {low:,}"
        raise HarnessError(f"{option} must be {bounds}, not {value:,}")


TERMINATION_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
_received: list[int] = []


def _as_ctrl_c(signum: int, frame: object) -> None:
    _received.append(signum)
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:  # e.g. a background job
        raise KeyboardInterrupt
    signal.raise_signal(signal.SIGINT)  # asyncio then cancels the run as on Ctrl-C


@contextmanager
def termination_as_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP end the block as Ctrl-C would (KeyboardInterrupt, with every
    call cancelled cleanly); `interrupted_by` then names the signal."""
    _received.clear()
    previous = {sent: signal.signal(sent, _as_ctrl_c) for sent in TERMINATION_SIGNALS}
    try:
        yield
    finally:
        for sent, handler in previous.items():
            signal.signal(sent, handler)


def interrupted_by() -> signal.Signals:
    """The signal that interrupted the last `termination_as_interrupt` block."""
    return signal.Signals(_received[-1] if _received else signal.SIGINT)
