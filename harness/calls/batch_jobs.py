"""`batch: true` (docs/batch.md): cache misses collected for `batch_collect_s`, split into jobs
within the API's limits, written in the run's ledger before and after submitting, followed to
the end; answers land in the cache under the requests' own keys. A re-run attaches to open
jobs; what a job did not answer goes again (`batch_rounds`) or online (`batch_fallback`)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any

from rich.console import Console

from harness.calls.batch_ledger import BatchLedger
from harness.calls.cache import ResponseCache
from harness.core.sanitize import terminal_text
from harness.core.secrets import scrub, scrub_value
from harness.core.types import ChatRequest, ProviderError, Request
from providers.batch import BatchApi, BatchResults

SUBMIT_ATTEMPTS = 4
Online = Callable[[Request], Awaitable[dict[str, Any]]]
Pending = dict[str, tuple[ChatRequest, "asyncio.Future[dict[str, Any]]"]]


@dataclass
class BatchStats:
    """run.json `batch`."""

    batches: int = 0  # jobs submitted by this run
    requests: int = 0  # requests sent in them
    attached: int = 0  # jobs of an earlier run this run followed instead of resubmitting
    answered_attached: int = 0  # answers from those jobs (paid by the earlier run)
    answered: int = 0  # answers received from jobs (attached ones included)
    resubmitted: int = 0  # requests sent again after a job did not answer them
    answered_online: int = 0  # requests answered online after a job did not (fallback)
    unreadable_lines: int = 0  # output lines that could not be read (kept in the ledger)


class BatchCollector:
    def __init__(
        self,
        api: BatchApi,
        ledger: BatchLedger,
        cache: ResponseCache,
        console: Console,
        online: Online,
        on_sent: Callable[[int], None],
    ) -> None:
        self.api = api
        self.settings = api.settings
        self.ledger = ledger
        self.cache = cache
        self.console = console
        self.online = online
        self.on_sent = on_sent
        self.stats = BatchStats()
        self._pending: Pending = {}
        self._last_arrival = 0.0
        self._worker: asyncio.Task[None] | None = None
        self._attached = False

    async def answer(self, key: str, request: Request) -> dict[str, Any]:
        if not isinstance(request, ChatRequest):
            raise TypeError(f"batch mode answers chat requests, not {request!r}")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[dict[str, Any]] = loop.create_future()
        self._pending[key] = (request, future)
        self._last_arrival = loop.time()
        if self._worker is None or self._worker.done():
            self._worker = asyncio.ensure_future(self._work())
        return await future

    def close(self) -> None:
        if self._worker is not None:
            self._worker.cancel()

    async def _work(self) -> None:
        loop = asyncio.get_running_loop()
        while self._pending:
            quiet = loop.time() - self._last_arrival
            if quiet < self.settings.collect_s:
                await asyncio.sleep(self.settings.collect_s - quiet)
                continue
            taken, self._pending = self._pending, {}
            try:
                await self._settle(taken)
            except ProviderError as exc:
                _fail(self._resolve_cached(taken), exc)  # answers already stored still count
            except Exception as exc:  # a bug must fail the requests, not hang the run
                error = ProviderError(f"{type(exc).__name__}: {exc}", transient=False)
                _fail(self._resolve_cached(taken), error)

    async def _settle(self, taken: Pending) -> None:
        if not self._attached:
            await self._attach()
            self._attached = True
        last: dict[str, ProviderError] = {}
        for round_index in range(self.settings.rounds):
            taken = self._resolve_cached(taken)
            if not taken:
                return
            if round_index:
                self.stats.resubmitted += len(taken)
            jobs = await asyncio.gather(
                *(self._run_job(chunk) for chunk in self._chunks(taken)), return_exceptions=True
            )
            for job in jobs:
                if isinstance(job, BaseException):
                    raise job
                last.update(job.errors)
            for key, error in last.items():
                if key in taken and not error.transient:
                    _fail({key: taken.pop(key)}, error)
            taken = self._resolve_cached(taken)
            if taken and self.settings.fallback == "online":
                await self._answer_online(taken)
                return
        for key, entry in taken.items():
            reason = last.get(key)
            _fail(
                {key: entry},
                ProviderError(
                    f"no answer after {self.settings.rounds} batch job(s)"
                    + (f" (last: {reason})" if reason else "")
                    + "; run again to send it again",
                    transient=False,
                    kind=reason.kind if reason else "batch_incomplete",
                ),
            )

    def _resolve_cached(self, taken: Pending) -> Pending:
        rest: Pending = {}
        for key, (request, future) in taken.items():
            if future.done():
                continue
            cached = self.cache.get(key, "chat")
            if cached is None:
                rest[key] = (request, future)
            else:
                future.set_result(cached)
        return rest

    def _chunks(self, taken: Pending) -> list[list[tuple[str, ChatRequest]]]:
        chunks: list[list[tuple[str, ChatRequest]]] = [[]]
        size = 0
        for key, (request, _) in taken.items():
            added = self.api.size(request)
            if chunks[-1] and (
                len(chunks[-1]) >= self.api.max_requests or size + added > self.api.max_bytes
            ):
                chunks.append([])
                size = 0
            chunks[-1].append((key, request))
            size += added
        return chunks

    async def _attach(self) -> None:
        for entry in self.ledger.open_entries():
            batch_id = entry.batch_id or await self.api.find(entry.label)
            if batch_id is None:
                self.ledger.abandoned(entry.label)  # killed before the job was created
                continue
            if entry.batch_id is None:
                self.ledger.submitted(entry.label, batch_id)
            self._say(f"attaching to {batch_id} ({len(entry.keys)} requests), sent earlier")
            try:
                results = await self._follow(entry.label, batch_id, entry.keys)
            except ProviderError as exc:
                if exc.kind != "not_found":
                    raise  # e.g. a refused key: the job may still answer once it is fixed
                self.ledger.abandoned(entry.label)
                self._say(f"{batch_id} is unknown to the server ({exc}); its requests go again")
                continue
            self.stats.attached += 1
            self.stats.answered_attached += len(results.answers)

    async def _run_job(self, chunk: list[tuple[str, ChatRequest]]) -> BatchResults:
        label = f"bgm-judge-{uuid.uuid4().hex[:16]}"
        self.ledger.submitting(label, [key for key, _ in chunk], self.api.name)
        batch_id = await self._submit(chunk, label)
        self.ledger.submitted(label, batch_id)
        self.stats.batches += 1
        self.stats.requests += len(chunk)
        self.on_sent(len(chunk))
        self._say(f"submitted {batch_id}: {len(chunk)} requests")
        return await self._follow(label, batch_id, [key for key, _ in chunk])

    async def _submit(self, chunk: list[tuple[str, ChatRequest]], label: str) -> str:
        """Submit, retrying transient failures; before a retry, look for the job by its label
        (a lost answer must not create a second, paid job)."""
        for attempt in range(SUBMIT_ATTEMPTS):
            try:
                return await self.api.submit(chunk, label)
            except ProviderError as exc:
                if not exc.transient or attempt == SUBMIT_ATTEMPTS - 1:
                    self.ledger.abandoned(label)
                    raise
                await asyncio.sleep(min(2**attempt, 30) * 0.5)
                found = await self.api.find(label)
                if found is not None:
                    return found
        raise AssertionError("unreachable")  # pragma: no cover

    async def _follow(self, label: str, batch_id: str, keys: list[str]) -> BatchResults:
        """Poll the job until it finishes; store its answers to `keys` (others: unreadable)."""
        total = len(keys)
        started = time.monotonic()
        shown: tuple[Any, ...] = ()
        while True:
            try:
                progress = await self.api.progress(batch_id)
            except ProviderError as exc:
                if not exc.transient:
                    raise
                self._say(f"{batch_id}: status check failed ({exc}); trying again")
            else:
                now = (progress.status, progress.done, progress.failed)
                if now != shown:
                    shown = now
                    done = "" if progress.done is None else f", {progress.done}/{total} done"
                    failed = f", {progress.failed} failed" if progress.failed else ""
                    elapsed = time.monotonic() - started
                    self._say(
                        f"{batch_id}: {progress.status}{done}{failed} ({total} requests, "
                        f"{elapsed:.0f} s)"
                    )
                if progress.finished:
                    break
            await asyncio.sleep(self.settings.poll_s)
        results = await self.api.results(batch_id)
        held = set(keys)
        for key in [key for key in results.answers if key not in held]:
            del results.answers[key]
            results.unreadable.append(f"an answer for {key[:80]!r}, not a request of this job")
        for key in [key for key in results.errors if key not in held]:
            results.errors.pop(key)
        for key, answer in results.answers.items():
            self.cache.set(key, scrub_value(answer))
        self.stats.answered += len(results.answers)
        self.stats.unreadable_lines += len(results.unreadable)
        summary: dict[str, Any] = {
            "status": progress.status,
            "answered": len(results.answers),
            "errors": {key: f"{e.kind}: {scrub(str(e))}" for key, e in results.errors.items()},
            "unreadable": [scrub(line)[:2000] for line in results.unreadable],
        }
        if results.note:
            summary["note"] = scrub(results.note)
        self.ledger.collected(label, batch_id, summary)
        if results.unreadable:
            self._say(
                f"{batch_id}: {len(results.unreadable)} output line(s) could not be "
                f"read (kept in {self.ledger.path}); their requests are sent again"
            )
        return results

    async def _answer_online(self, taken: Pending) -> None:
        self.stats.answered_online += len(taken)
        self._say(f"{len(taken)} request(s) the batch jobs did not answer go online")

        async def one(key: str, request: ChatRequest, future: asyncio.Future[Any]) -> None:
            try:
                answer = scrub_value(await self.online(request))
            except ProviderError as exc:
                _fail({key: (request, future)}, exc)
                return
            self.cache.set(key, answer)
            if not future.done():
                future.set_result(answer)

        await asyncio.gather(*(one(key, req, fut) for key, (req, fut) in taken.items()))

    def _say(self, text: str) -> None:
        self.console.print(f"[cyan]batch[/] {terminal_text(text)}", highlight=False)

    def to_json(self) -> dict[str, Any]:
        return asdict(self.stats)


def _fail(taken: Pending, error: ProviderError) -> None:
    for _, future in taken.values():
        if not future.done():
            future.set_exception(error)
