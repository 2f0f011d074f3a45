"""Running the harness's coroutines from synchronous code, including from code that is
itself inside a running event loop (a Jupyter cell), where `asyncio.run` refuses; and a call's
timeout that times the model, not the queue in front of it (`call_timeout`, `model_clock`)."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import AsyncIterator, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any, TypeVar

T = TypeVar("T")
_restart: contextvars.ContextVar[Callable[[int], None]] = contextvars.ContextVar(
    "restart", default=lambda ahead: None
)


@asynccontextmanager
async def call_timeout(seconds: float) -> AsyncIterator[None]:
    """`asyncio.timeout(seconds)` for one call, which `model_clock()` restarts."""
    async with asyncio.timeout(seconds) as timeout:
        loop = asyncio.get_running_loop()
        token = _restart.set(lambda ahead: timeout.reschedule(loop.time() + seconds * (ahead + 1)))
        try:
            yield
        finally:
            _restart.reset(token)


def model_clock() -> Callable[[int], None]:
    """`restart(ahead)` for the call this task is making: its timeout starts again, with
    room for `ahead` calls (or batches) that the model answers before it. A provider that
    queues calls for one model (a lock, a micro-batch) calls it as a call joins the queue
    and with 0 when the model takes it up: the wait is not timed as the model's."""
    return _restart.get()


def run_coroutine(coroutine: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(coroutine)`, or, when this thread already runs an event loop, the same in
    a worker thread with a loop of its own (the caller's loop waits for it)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with ThreadPoolExecutor(1, thread_name_prefix="bgm-judge-run") as worker:
        context = contextvars.copy_context()
        return worker.submit(context.run, asyncio.run, coroutine).result()
