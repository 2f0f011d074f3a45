"""A run's calls rendered by a second process while this one answers them.

A run whose answers are in the cache waits on nothing: this process renders each prompt,
digests it into its cache key, reads the answer, parses it and writes the record, all on
one core. Rendering and keying are two fifths of that (the prompts of a warm 50,000-call
replay), and they need nothing from the answers, so a forked worker runs the rest of the
plan's calls iterator (`CallPlan.calls`) and sends the calls back in blocks, in their order,
while this process answers the ones it already has. The keys are the same code's on the same
inputs: nothing is guessed or memoised, so a call's key is still the digest of the request
it would send.

The runner hands over only after the plan's first calls were rendered here and the cache
answered every one of them (`call_window.run_in_window`): set-up and template errors of the first
call still stop a run before anything is asked, and a run that waits on its model gains
nothing from a second renderer. The pipe holds a block or two, so the worker is never more
than that ahead (memory stays flat in the number of calls).

Anything amiss with the worker (not Linux, one core, not the main thread: `fork_context`; a
template that fails on a later item, the worker killed) leaves the rendering to this process
from the first call it did not receive: the same calls, and the same error at the same call,
as without a worker."""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from multiprocessing.connection import Connection
from pathlib import Path

from harness.calls.cache import ResponseCache, stored_rows
from harness.core.workers import ForkedWorker
from harness.protocols.plans import Call

BLOCK = 256  # calls per message: pickling a block costs a few per cent of rendering it
_END = "end"


def _render(connection: Connection, calls: Iterator[Call], database: Path) -> None:
    try:
        # a connection of its own: SQLite's may not cross a fork
        with closing(sqlite3.connect(database)) as db:
            while block := list(itertools.islice(calls, BLOCK)):
                connection.send((block, stored_rows(db, [call.key for call in block])))
        connection.send(_END)
    except BaseException:  # anything at all: the parent renders from where this stopped
        pass


class CallsAhead(ForkedWorker):
    """`with CallsAhead(cache) as ahead: ... calls = ahead.take_over(calls)`: from then on
    the calls come from a worker, where one can be forked, with the cache's rows for their
    keys read in the same blocks; the worker is gone after the block."""

    def __init__(self, cache: ResponseCache) -> None:
        super().__init__()
        self.cache = cache

    @property
    def reads_the_cache(self) -> bool:
        """Whether the worker reads the cached answers of the calls it sends (so that the
        runner need not, `ResponseCache.prefetch`)."""
        return self.connection is not None

    def take_over(self, calls: Iterator[Call]) -> Iterator[Call]:
        """The rest of `calls`, rendered by a worker forked now (this process's copy of
        `calls` is left where it is, for the calls the worker does not send)."""
        self.start(_render, calls, self.cache.database)
        if not self.started:
            return calls
        return self._received(calls)

    def _received(self, calls: Iterator[Call]) -> Iterator[Call]:
        taken = 0
        while True:
            message = self.receive()
            if isinstance(message, tuple):
                block, rows = message
                self.cache.hold(rows)
                taken += len(block)
                yield from block
            elif message == _END:
                return
            else:  # the worker failed or died: the rest is rendered here
                self.fell_back = True
                self._hang_up()
                yield from itertools.islice(calls, taken, None)
                return
