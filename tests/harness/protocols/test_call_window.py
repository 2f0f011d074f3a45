"""`run_in_window`: calls start as they are prepared, never more than the limit unfinished;
the first failure cancels the calls still running and is raised."""

from __future__ import annotations

import asyncio

import pytest

from harness.core.types import ChatRequest
from harness.protocols.call_window import run_in_window
from harness.protocols.plans import Call


def calls(n: int) -> list[Call]:
    request = ChatRequest(system="s", parts=("u",))
    return [Call(f"d{i}", 0, ("a",), request, f"key{i}") for i in range(n)]


def test_no_more_than_the_limit_is_unfinished_and_every_call_is_counted() -> None:
    running, most, done = 0, 0, []
    counted: list[int] = []

    async def one(call: Call) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.001)
        running -= 1
        done.append(call.item_id)

    asyncio.run(run_in_window(calls(50), one, counted.append, limit=8))
    assert counted == [50] and sorted(done) == sorted(f"d{i}" for i in range(50))
    assert most == 8


def test_the_first_failure_cancels_the_calls_still_running() -> None:
    cancelled: list[str] = []

    async def one(call: Call) -> None:
        if call.item_id == "d3":
            raise OSError("disk full")
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append(call.item_id)
            raise

    window = run_in_window(calls(20), one, lambda n: None, limit=8)
    with pytest.raises(OSError, match="disk full"):
        asyncio.run(asyncio.wait_for(window, 5))
    assert cancelled and "d3" not in cancelled
