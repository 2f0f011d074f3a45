"""A helper process a command forks to use a second core (`harness evaluate`'s predictions
reader, `harness report`'s figure drawer): where it may fork, and the helper's life."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.context import ForkContext
from multiprocessing.process import BaseProcess
from types import TracebackType
from typing import Any, Self


def fork_context() -> ForkContext | None:
    """The fork start method, on Linux with two cores or more this process may use, from its
    main thread; None elsewhere: macOS has fork, but libraries it links (Accelerate,
    Objective-C) may crash in a forked child; with one core a worker only competes with its
    parent; and a run in another thread (`harness.core.event_loop`, inside a notebook's event loop)
    shares its process with threads that may hold a lock the child would wait on forever
    (IPython saves its history through SQLite from a thread of its own)."""
    if sys.platform != "linux" or len(os.sched_getaffinity(0)) < 2:
        return None
    if threading.current_thread() is not threading.main_thread():
        return None
    return multiprocessing.get_context("fork")


def _run(
    target: Callable[..., None], connection: Connection, parents_end: Connection, *args: Any
) -> None:
    # The fork copied the parent's end of the pipe too: held here, it would keep the pipe
    # open after the parent died (killed, SIGTERM), and the worker would wait on it forever.
    parents_end.close()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    # A signal sent to the worker alone must not reach the parent: the handlers it copied
    # (SIGTERM as Ctrl-C, `harness.cli.common`) and an event loop's wake-up pipe are its.
    for sent in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sent, signal.SIG_DFL)
    signal.set_wakeup_fd(-1)
    target(connection, *args)


class ForkedWorker:
    """A forked helper and a pipe to it, for a `with` block: `start` forks it where a fork
    may help; after the block it is gone (killed if it has not finished). Whoever uses it
    does the helper's work itself when it did not start or died (`fell_back`)."""

    def __init__(self) -> None:
        self._process: BaseProcess | None = None
        self._pid: int | None = None
        self.connection: Connection | None = None
        self.fell_back = False

    @property
    def started(self) -> bool:
        return self._process is not None

    @property
    def worker_pid(self) -> int | None:
        return self._pid

    def start(self, target: Callable[..., None], *args: Any, daemon: bool = True) -> None:
        """Fork a worker running `target(connection, *args)`, unless `fork_context` says no.
        `daemon=False` for a worker that forks helpers of its own (multiprocessing forbids a
        daemon that): the `with` block ends it all the same."""
        context = fork_context()
        if context is None:
            return
        mine, theirs = context.Pipe()
        process = context.Process(target=_run, args=(target, theirs, mine, *args), daemon=daemon)
        process.start()
        theirs.close()  # the worker's end: EOF here once the worker is gone
        self._process, self._pid, self.connection = process, process.pid, mine

    def send(self, message: Any) -> None:
        """Send the worker `message`; if it is gone, stop talking to it."""
        if self.connection is None:
            return
        try:
            self.connection.send(message)
        except OSError:
            self._hang_up()

    def receive(self) -> Any:
        """The worker's next message; None if it sent None, never started, or died."""
        if self.connection is None:
            return None
        try:
            return self.connection.recv()
        except (EOFError, OSError):  # killed, out of memory
            self._hang_up()
            return None

    def _hang_up(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._process is not None:
            if self._process.is_alive():
                self._process.kill()
            self._process.join()
            self._process.close()
        self._hang_up()
