"""Running the harness's coroutines from synchronous code, including from code that is
itself inside a running event loop (a Jupyter cell), where `asyncio.run` refuses."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_coroutine(coroutine: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(coroutine)`, or, when this thread already runs an event loop, the same in
    a worker thread with a loop of its own (the caller's loop waits for it)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    outcome: dict[str, Any] = {}
    context = contextvars.copy_context()

    def worker() -> None:
        try:
            outcome["value"] = context.run(asyncio.run, coroutine)
        except BaseException as exc:  # re-raised in the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=worker, name="bgm-judge-run", daemon=True)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    value: T = outcome["value"]
    return value
