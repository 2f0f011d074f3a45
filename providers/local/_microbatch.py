"""Micro-batching for local models: the call path sends `generate` calls concurrently (up to
`max_concurrency` in flight); `MicroBatcher` collects the waiting requests, up to
`batch_size`, and answers them with one padded forward pass in a worker thread, so a GPU
stays busy while the event loop keeps feeding it. Set `max_concurrency` to at least
`batch_size` (twice is better, so the next batch is queued while one runs)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from harness.core.event_loop import model_clock

Item = TypeVar("Item")
Result = TypeVar("Result")


class MicroBatcher(Generic[Item, Result]):
    """Answers concurrent `submit` calls in batches of up to `batch_size` with one call of
    `run_batch` (in a worker thread, one batch at a time). A batch starts as soon as it is
    full or `wait_s` after its first request arrived; requests that come while a batch
    runs form the next one."""

    def __init__(
        self,
        run_batch: Callable[[list[Item]], Sequence[Result]],
        batch_size: int,
        wait_s: float = 0.005,
    ) -> None:
        self._run_batch = run_batch
        self.batch_size = batch_size
        self.wait_s = wait_s
        self._pending: list[tuple[Item, asyncio.Future[Result], Callable[[int], None]]] = []
        self._worker: asyncio.Task[None] | None = None
        self.batch_sizes: list[int] = []  # sizes of the batches run so far (for tests/bench)

    async def submit(self, item: Item) -> Result:
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        restart_clock = model_clock()
        restart_clock(len(self._pending) // self.batch_size + 1)  # and a batch running
        self._pending.append((item, future, restart_clock))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        while self._pending:
            deadline = loop.time() + self.wait_s
            while len(self._pending) < self.batch_size and loop.time() < deadline:
                await asyncio.sleep(0.001)
            taken = self._pending[: self.batch_size]
            del self._pending[: self.batch_size]
            live = [entry for entry in taken if not entry[1].done()]
            if not live:
                continue
            self.batch_sizes.append(len(live))
            for *_, restart_clock in live:  # the model takes these calls up: time them now
                restart_clock(0)
            try:
                results = await asyncio.to_thread(self._run_batch, [item for item, *_ in live])
            except Exception as exc:
                for _, future, _ in live:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for (_, future, _), result in zip(live, results, strict=True):
                if not future.done():
                    future.set_result(result)

    async def aclose(self) -> None:
        if self._worker is not None and not self._worker.done():
            self._worker.cancel()
        self._worker = None
