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
from multiprocessing.connection import Connection

from harness.report.plots import Figure
from harness.report.writing import FigureInputs, draw_figures
from harness.workers import ForkedWorker


def _serve(connection: Connection) -> None:
    try:
        import matplotlib.backends.backend_agg
        import matplotlib.backends.backend_pdf
        import matplotlib.figure  # noqa: F401 - imported now, while the parent loads the runs

        figures: dict[str, Figure] | None = draw_figures(connection.recv())
    except BaseException:  # anything at all: the parent draws them itself
        figures = None
    with contextlib.suppress(OSError):  # OSError: the parent stopped listening
        connection.send(figures)


class FigureWorker(ForkedWorker):
    """`with FigureWorker() as drawer: ...; write_report(..., drawer=drawer)`: the worker
    starts on entering the block (`harness.workers.fork_context`), and is gone after it."""

    def __enter__(self) -> FigureWorker:
        self.start(_serve)
        return self

    def draw(self, inputs: FigureInputs) -> None:
        """Start drawing the figures of `inputs` (sent to the worker)."""
        self.send(inputs)

    def figures(self, inputs: FigureInputs) -> dict[str, Figure]:
        """The figures of `inputs`, as `draw_figures` draws them."""
        figures = self.receive()
        if figures is None:
            self.fell_back = self.started
            return draw_figures(inputs)
        return dict(figures)
