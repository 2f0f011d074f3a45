"""Running the harness's coroutines from synchronous code, including from code that is
itself inside a running event loop (a Jupyter cell), where `asyncio.run` refuses."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


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
