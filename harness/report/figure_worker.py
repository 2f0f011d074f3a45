"""`harness report`'s figures drawn by a second process.

Drawing is the largest part of a report of many runs (importing matplotlib alone takes most
of a second here, its PDF backend another quarter), and nothing else in the report needs the
figures until the page is complete. So a worker is forked when the command starts: it
imports matplotlib while this process loads the runs, draws the figures from the small
`FigureInputs` once the analysis sends them, and hands them back while this process writes
the tables and the page (`write_report` puts them in last).

Anything amiss with the worker (not Linux, one core, killed, failed) leaves the drawing to
this process: slower, never different (the same code draws them)."""

from __future__ import annotations

import contextlib
import signal
from multiprocessing.connection import Connection
from types import TracebackType
from typing import Any

from harness.report.plots import Figure
from harness.report.writing import FigureInputs, draw_figures
from harness.workers import fork_context


def _serve(connection: Connection) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    figures: dict[str, Figure] | None = None
    try:
        import matplotlib.backends.backend_agg
        import matplotlib.backends.backend_pdf
        import matplotlib.figure  # noqa: F401 - imported now, while the parent loads the runs

        inputs = connection.recv()
        figures = draw_figures(inputs)
    except BaseException:  # anything at all: the parent draws them itself
        figures = None
    with contextlib.suppress(OSError):  # OSError: the parent stopped listening
        connection.send(figures)


class FigureWorker:
    """`with FigureWorker() as drawer: ...; write_report(..., drawer=drawer)`: the worker
    starts on entering the block, if there are two cores to share, and is gone after it."""

    def __init__(self) -> None:
        self._process: Any = None
        self._pid: int | None = None
        self._connection: Connection | None = None
        self.fell_back = False

    @property
    def started(self) -> bool:
        return self._process is not None

    @property
    def worker_pid(self) -> int | None:
        return self._pid

    def __enter__(self) -> FigureWorker:
        context = fork_context()
        if context is not None:
            mine, theirs = context.Pipe()
            process = context.Process(target=_serve, args=(theirs,), daemon=True)
            process.start()
            theirs.close()  # EOF here once the worker is gone
            self._process, self._pid, self._connection = process, process.pid, mine
        return self

    def draw(self, inputs: FigureInputs) -> None:
        """Start drawing the figures of `inputs` (sent to the worker)."""
        if self._connection is None:
            return
        try:
            self._connection.send(inputs)
        except OSError:  # the worker is gone: `figures` draws them here
            self._connection.close()
            self._connection = None

    def figures(self, inputs: FigureInputs) -> dict[str, Figure]:
        """The figures of `inputs`, as `draw_figures` draws them."""
        figures = None
        if self._connection is not None:
            try:
                figures = self._connection.recv()
            except (EOFError, OSError):  # the worker died (killed, out of memory)
                figures = None
        if figures is None:
            self.fell_back = self.started
            return draw_figures(inputs)
        return dict(figures)

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
        if self._connection is not None:
            self._connection.close()
