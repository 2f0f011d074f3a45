"""Group commit of fresh answers: the answers that arrive in one turn of the event loop are
stored in one cache transaction, then their claims released in one more, instead of two
transactions for each (at concurrency 64 against a fast server, a turn brings about ten).

Each caller waits until its answer is committed, as if it had stored it alone: a record is
never written for an answer the cache does not hold, and an interrupted run resumes from
the cache without paying twice. A caller cancelled while it waits (Ctrl-C) does not take
its answer along: the commit still stores it, and `flush` stores what is left at the end.
"""

from __future__ import annotations

import asyncio
from typing import Any

from harness.calls.cache import ResponseCache
from harness.core.errors import StorageError


class GroupCommit:
    def __init__(self, cache: ResponseCache) -> None:
        self.cache = cache
        self._entries: list[tuple[str, dict[str, Any]]] = []
        self._waiters: list[asyncio.Future[None]] = []
        self._watchers: list[asyncio.Future[None]] = []  # `settled`
        self.commits = 0  # transactions that stored answers (tests, benchmarks)
        self.failure: StorageError | None = None  # the first store that failed

    async def store(self, key: str, value: dict[str, Any]) -> None:
        """Store `value` under `key` with the other answers of this turn, then release this
        process's claim on `key`. Raises StorageError when the cache could not store them."""
        loop = asyncio.get_running_loop()
        if self._waiters and self._waiters[0].get_loop() is not loop:
            self.flush()  # left by a loop that ended before their commit
        if not self._entries:
            loop.call_soon(self.flush)
        done = loop.create_future()
        self._entries.append((key, value))
        self._waiters.append(done)
        await done

    async def settled(self) -> None:
        """Wait until the answers queued so far are committed (at once when none is): a
        request sent meanwhile would be paid for in vain if their store fails."""
        if self._entries:
            watcher = asyncio.get_running_loop().create_future()
            self._watchers.append(watcher)
            await watcher

    def flush(self) -> None:
        """Commit what waits to be stored (a no-op when nothing does)."""
        entries, waiters, watchers = self._entries, self._waiters, self._watchers
        if not entries:
            return
        self._entries, self._waiters, self._watchers = [], [], []
        outcomes = self._store_all(entries)
        failure = next((o for o in outcomes if isinstance(o, StorageError)), None)
        try:
            self.cache.release_many([key for key, _ in entries])
        except StorageError as exc:  # the claims lapse with their lease
            failure = failure or exc
            outcomes = [o or exc for o in outcomes]
        self.failure = self.failure or failure
        for watcher in watchers:
            if not _gone(watcher):
                watcher.set_result(None)
        for waiter, outcome in zip(waiters, outcomes, strict=True):
            if _gone(waiter):  # its caller was cancelled: the answer is stored all the same
                continue
            if outcome is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(outcome)

    def _store_all(self, entries: list[tuple[str, dict[str, Any]]]) -> list[Exception | None]:
        """Store `entries` in one transaction; what went wrong for each (None: stored). A
        value the cache cannot hold (not JSON) fails its own call only: the others are then
        stored one at a time."""
        try:
            self.cache.set_many(entries)
        except StorageError as exc:  # a full disk: nothing of the turn is kept
            return [StorageError(str(exc)) for _ in entries]
        except Exception:
            outcomes: list[Exception | None] = []
            for key, value in entries:
                try:
                    self.cache.set(key, value)
                    outcomes.append(None)
                except Exception as exc:
                    outcomes.append(exc)
            return outcomes
        self.commits += 1
        return [None] * len(entries)


def _gone(waiter: asyncio.Future[None]) -> bool:
    """Whether nobody waits on `waiter` any more (cancelled, or its loop closed)."""
    return waiter.done() or waiter.get_loop().is_closed()
