"""`harness report`'s figures drawn by a second process.

Drawing is the largest part of a report of many runs (importing matplotlib alone takes most
of a second here, its PDF backend another quarter), and nothing else in the report needs the
figures until the page is complete. So a worker is forked when the command starts: it
imports matplotlib while this process loads the runs, draws the figures from the small
`FigureInputs` once the analysis sends them, and hands them back while this process writes
the tables and the page (`write_report` puts them in last). Once it has the inputs, the
worker forks a helper of its own that draws every other figure (the heatmap): matplotlib is
imported already, and two figures are drawn at once while this process waits.

Anything amiss with the worker (not Linux, one core, killed, failed) leaves the drawing to
this process: slower, never different (the same code draws them)."""

from __future__ import annotations

import contextlib
from multiprocessing.connection import Connection

from harness.core.workers import ForkedWorker
from harness.reports.plots import Figure
from harness.reports.writing import FigureInputs, draw_figures


def _serve(connection: Connection) -> None:
    try:
        import matplotlib.backends.backend_agg
        import matplotlib.backends.backend_pdf
        import matplotlib.figure  # noqa: F401 - imported now, while the parent loads the runs

        figures: dict[str, Figure] | None = _draw_shared(connection.recv())
    except BaseException:  # anything at all: the parent draws them itself
        figures = None
    with contextlib.suppress(OSError):  # OSError: the parent stopped listening
        connection.send(figures)


def _draw_shared(inputs: FigureInputs) -> dict[str, Figure]:
    """`draw_figures(inputs)`, every other figure drawn by a helper forked for it (drawn
    here after all if the helper does not start or dies), in the same order."""
    mine, theirs = inputs.names[0::2], inputs.names[1::2]
    with ForkedWorker() as helper:
        if theirs:
            helper.start(_serve_share, inputs, theirs)
        figures = draw_figures(inputs, names=mine)
        shared: dict[str, Figure] | None = helper.receive()
    if shared is None:
        shared = draw_figures(inputs, names=theirs)
    return {name: (figures | shared)[name] for name in inputs.names}


def _serve_share(connection: Connection, inputs: FigureInputs, names: list[str]) -> None:
    try:
        figures: dict[str, Figure] | None = draw_figures(inputs, names=names)
    except BaseException:  # the worker draws them itself
        figures = None
    with contextlib.suppress(OSError):
        connection.send(figures)


class FigureWorker(ForkedWorker):
    """`with FigureWorker() as drawer: ...; write_report(..., drawer=drawer)`: the worker
    starts on entering the block (`harness.core.workers.fork_context`), and is gone after it."""

    def __enter__(self) -> FigureWorker:
        self.start(_serve, daemon=False)
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
