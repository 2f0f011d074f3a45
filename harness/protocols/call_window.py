"""The window of calls a run keeps in flight: each call started as soon as it is prepared,
at most `limit` started and unfinished, the cached answers of a block of calls read in one
query, and a replay's rendering handed to a second process (`calls_ahead`)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Iterable

from harness.calls.cache import ResponseCache
from harness.protocols.calls_ahead import CallsAhead
from harness.protocols.plans import Call

PREFETCH_BLOCK = 64  # calls whose cached answers are read in one query
PREFETCH_PROBE_EVERY = 16  # blocks, while a block's query finds nothing


async def run_in_window(
    calls: Iterable[Call],
    one: Callable[[Call], Awaitable[None]],
    counted: Callable[[int], None],
    *,
    cache: ResponseCache,
    limit: int | None,
    concurrency: int,
) -> None:
    """Start `one(call)` for each call as soon as it is prepared, with at most `limit` (all
    when None) started and unfinished; `counted(n)` once every call has been started. The
    first failure (a full disk, a damaged cache, an interruption) cancels the rest."""
    pending: set[asyncio.Future[None]] = set()

    async def settle(until: int) -> None:
        nonlocal pending
        while len(pending) > until:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for future in done:  # each failure read, so none is logged as never retrieved
                if not future.cancelled():
                    future.exception()
            for future in done:
                future.result()

    started = 0
    # Calls are prepared a block at a time, their cached answers read in one query; the
    # blocks are no larger than the concurrency, so the first requests go out as before.
    size = min(PREFETCH_BLOCK, concurrency)
    upcoming = iter(calls)
    hits_ahead, blocks = True, 0
    try:
        with CallsAhead(cache) as ahead:
            while True:
                if limit is not None:
                    await settle(max(0, limit - size))  # room for the block in the window
                block = list(itertools.islice(upcoming, size))
                if not block:
                    break
                # A run whose answers are not cached (yet) asks again only now and then;
                # a renderer worker reads them with the calls it sends.
                probe = hits_ahead or blocks % PREFETCH_PROBE_EVERY == 0
                if probe and not ahead.reads_the_cache:
                    found = cache.prefetch([call.key for call in block])
                    hits_ahead = found > 0
                    if blocks == 0 and found == len(block) and limit is not None:
                        # A replay waits on nothing: a second core renders the rest.
                        upcoming = ahead.take_over(upcoming)
                blocks += 1
                for call in block:
                    pending.add(asyncio.ensure_future(one(call)))
                started += len(block)
                await asyncio.sleep(0)  # let the requests go out while the next are rendered
            counted(started)
            await settle(0)
    except BaseException:
        await _cancel_all(list(pending))
        raise


async def _cancel_all(futures: list[asyncio.Future[None]]) -> None:
    """Cancel the calls still running and wait until they have stopped."""
    for future in futures:
        future.cancel()
    await asyncio.gather(*futures, return_exceptions=True)
