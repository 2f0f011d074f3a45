"""The window of calls a run keeps in flight (memory stays flat in the number of calls)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable

from harness.protocols.plans import Call


async def run_in_window(
    calls: Iterable[Call],
    one: Callable[[Call], Awaitable[None]],
    counted: Callable[[int], None],
    *,
    limit: int | None,
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
    upcoming = iter(calls)
    try:
        while True:
            if limit is not None:
                await settle(limit - 1)  # room in the window before the next is prepared
            call = next(upcoming, None)
            if call is None:
                break
            pending.add(asyncio.ensure_future(one(call)))
            started += 1
            await asyncio.sleep(0)  # its request goes out while the next one is prepared
        counted(started)
        await settle(0)
    except BaseException:
        for future in pending:
            future.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        raise
