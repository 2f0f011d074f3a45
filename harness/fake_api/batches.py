"""Batch jobs of both wire formats: the files and jobs, how a job's requests are answered (as
online, without transient faults), and what was paid (docs/fake_api.md, batch faults)."""

from __future__ import annotations

import collections
import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from harness.fake_api.answers import audio_info, digest
from harness.fake_api.faults import ERROR_MODEL, answer_mode
from harness.fake_api.gemini import gemini_body
from harness.fake_api.openai import openai_body
from harness.fake_api.state import ANSWER_MODES, FakeState, ParsedRequest, Reply


def paid_key(parsed: ParsedRequest) -> str:
    """What a request asks, whichever API and form it came in."""
    return digest(
        parsed.model,
        parsed.system,
        parsed.user_text,
        *(data for data, _ in parsed.audio),
        repr(sorted((parsed.schema or {}).items())),
        ",".join(parsed.roles),
    ).hex()


def answer_parsed(
    api: str, parsed: ParsedRequest, state: FakeState, seconds: float
) -> tuple[str, dict[str, Any], str | None]:
    """The answer mode, body and text of a request (a Reply for an error answer)."""
    mode = answer_mode(parsed, state.settings)
    if mode not in ANSWER_MODES:
        raise Reply(404, f"models/{parsed.model}: unknown answer mode {mode!r}")
    builder = gemini_body if api == "gemini" else openai_body
    return mode, *builder(mode, parsed, seconds, state.cached_tokens(parsed))


@dataclass
class Job:
    """One batch job: its requests (id, parsed request or the Reply that refused it), when
    it was created and what it has become."""

    id: str
    api: str
    created: float
    requests: list[tuple[str, ParsedRequest | Reply]]
    metadata: dict[str, Any] = field(default_factory=dict)
    status: str = "pending"  # pending, running, completed, expired, cancelled, failed
    # per request id: ("answer", body) / ("error", Reply) / ("unreadable", body) / ("expired", None)
    outcome: dict[str, tuple[str, Any]] = field(default_factory=dict)
    finished: float | None = None
    files: dict[str, str] = field(default_factory=dict)  # "output"/"error" -> file id
    errors: list[dict[str, Any]] = field(default_factory=list)


class BatchBook:
    """Files, jobs and payments, safe to read from test threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.files: dict[str, tuple[str, bytes]] = {}  # id -> (filename, content)
        self.jobs: dict[str, Job] = {}
        self.paid: collections.Counter[str] = collections.Counter()
        self.in_jobs: collections.Counter[str] = collections.Counter()  # request id -> jobs
        self._ids = itertools.count(1)
        self.created = 0

    def new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):06d}{digest(str(time.time())).hex()[:8]}"

    def pay(self, parsed: ParsedRequest) -> None:
        with self.lock:
            self.paid[paid_key(parsed)] += 1

    def add_job(self, job: Job) -> Job:
        with self.lock:
            self.jobs[job.id] = job
            self.created += 1
        return job

    def advance(self, job: Job, state: FakeState) -> Job:
        """Move a job on: running once seen, answered once its latency has passed."""
        settings = state.settings
        if job.status == "pending":
            job.status = "running"
        if job.status != "running" or time.time() < job.created + settings.batch_latency_s:
            return job
        with self.lock:
            expire = list(self.jobs).index(job.id) < settings.batch_expire_first
        # OpenAI delivers what an expired job answered; Gemini's expired jobs have no output.
        half = job.requests[: len(job.requests) // 2] if job.api == "openai" else []
        reached = half if expire else job.requests
        answered = {custom_id for custom_id, _ in reached}
        for custom_id, parsed in job.requests:
            job.outcome[custom_id] = self._answer(job, custom_id, parsed, state, answered)
        job.status = "expired" if expire else "completed"
        job.finished = time.time()
        return job

    def _answer(
        self,
        job: Job,
        custom_id: str,
        parsed: ParsedRequest | Reply,
        state: FakeState,
        answered: set[str],
    ) -> tuple[str, Any]:
        settings = state.settings
        if custom_id not in answered:
            return "expired", None
        if isinstance(parsed, Reply):
            return "error", parsed
        with self.lock:
            self.in_jobs[custom_id] += 1
            first = self.in_jobs[custom_id] == 1
        draw = int.from_bytes(digest(str(settings.seed), custom_id)[:4], "big") / 2**32
        if first and draw < settings.batch_error_rate:
            return "error", Reply(500, "the batch worker failed on this request")
        forced = ERROR_MODEL.search(parsed.model)
        try:
            if forced:
                raise Reply(int(forced[1]), f"the fake server always answers {forced[1]}")
            _, body, _ = answer_parsed(job.api, parsed, state, audio_info(parsed.audio)[0])
        except Reply as reply:
            return "error", reply
        self.pay(parsed)
        unreadable = 1.0 - draw < settings.batch_unreadable_rate
        return ("unreadable" if first and unreadable else "answer"), body

    def counts(self, job: Job) -> dict[str, int]:
        kinds = collections.Counter(kind for kind, _ in job.outcome.values())
        done = kinds["answer"] + kinds["unreadable"]
        return {"total": len(job.requests), "completed": done, "failed": kinds["error"]}

    def stats(self) -> dict[str, Any]:
        with self.lock:
            return {
                "batch_jobs": self.created,
                "paid_requests": sum(self.paid.values()),
                "paid_duplicates": sum(n - 1 for n in self.paid.values() if n > 1),
            }

    def reset(self) -> None:
        with self.lock:
            for table in (self.files, self.jobs, self.paid, self.in_jobs):
                table.clear()
            self.created = 0
