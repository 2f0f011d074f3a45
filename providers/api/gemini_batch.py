"""Gemini's batch mode: inline requests (the cache key in each one's `metadata`, the label as the
job's display name) in one create call, which the API bounds at 20 MB, audio included."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol

from google.genai import Client, types

from harness.core.audio import encode_wav
from harness.core.types import AudioRef, ChatRequest, ChatResponse, ProviderError
from providers.api._shared import MALFORMED_ANSWER_ERRORS, malformed_answer
from providers.base import chat_answer
from providers.batch import BatchApi, BatchProgress, BatchResults


class GeminiLike(Protocol):
    """What the adapter uses of the Gemini judge (providers.api.gemini)."""

    @property
    def model(self) -> str: ...

    sample_rate: int | None

    def contents(self, request: ChatRequest) -> list[types.Content]: ...

    def generation_config(self, request: ChatRequest) -> types.GenerateContentConfig: ...

    def read_response(self, response: types.GenerateContentResponse) -> ChatResponse: ...

    def batch_client(self) -> tuple[Client, str | None]: ...

    def sdk_errors(self, url: str | None, label: str) -> AbstractContextManager[None]: ...


KEY = "key"
FINISHED = frozenset(
    {
        types.JobState.JOB_STATE_SUCCEEDED,
        types.JobState.JOB_STATE_FAILED,
        types.JobState.JOB_STATE_CANCELLED,
        types.JobState.JOB_STATE_EXPIRED,
        types.JobState.JOB_STATE_PARTIALLY_SUCCEEDED,
    }
)
LISTED_JOBS = 1000
REQUEST_OVERHEAD = 2048  # bytes of JSON around a request's text and audio


class GeminiBatchApi(BatchApi):
    name = "Gemini batch mode"
    max_requests = 50_000
    max_bytes = 19 * 1024 * 1024  # inline requests: 20 MB per create call

    judge: GeminiLike

    def size(self, request: ChatRequest) -> int:
        text = len(request.system.encode()) + sum(
            len(p.encode()) for p in request.parts if isinstance(p, str)
        )
        text += sum(len(f.answer.encode()) + len(f.reply.encode()) for f in request.follow_ups)
        audio = sum(self._audio_bytes(p) for p in request.parts if isinstance(p, AudioRef))
        schema = len(str(request.response_schema or ""))
        return text + schema + audio * 4 // 3 + REQUEST_OVERHEAD

    def _audio_bytes(self, ref: AudioRef) -> int:
        return len(encode_wav(ref.path, self.judge.sample_rate))

    def _inlined(self, custom_id: str, request: ChatRequest) -> types.InlinedRequest:
        return types.InlinedRequest(
            contents=self.judge.contents(request),
            config=self.judge.generation_config(request),
            metadata={KEY: custom_id},
        )

    async def submit(self, entries: list[tuple[str, ChatRequest]], label: str) -> str:
        client, url = self.judge.batch_client()
        inlined = [self._inlined(custom_id, request) for custom_id, request in entries]
        with self.judge.sdk_errors(url, self.name):
            job = await client.aio.batches.create(
                model=self.judge.model,
                src=types.BatchJobSource(inlined_requests=inlined),
                config=types.CreateBatchJobConfig(display_name=label),
            )
        if not job.name:
            raise malformed_answer(self.name, ValueError("the job has no name"), url)
        return job.name

    async def find(self, label: str) -> str | None:
        client, url = self.judge.batch_client()
        seen = 0
        with self.judge.sdk_errors(url, self.name):
            async for job in await client.aio.batches.list(config={"page_size": 100}):
                if job.display_name == label:
                    return job.name
                seen += 1
                if seen >= LISTED_JOBS:
                    break
        return None

    async def progress(self, batch_id: str) -> BatchProgress:
        client, url = self.judge.batch_client()
        with self.judge.sdk_errors(url, self.name):
            job = await client.aio.batches.get(name=batch_id)
        state = job.state or types.JobState.JOB_STATE_UNSPECIFIED
        return BatchProgress(status=str(state.value), finished=state in FINISHED)

    async def results(self, batch_id: str) -> BatchResults:
        client, url = self.judge.batch_client()
        with self.judge.sdk_errors(url, self.name):
            job = await client.aio.batches.get(name=batch_id)
        results = BatchResults()
        if job.error is not None:
            results.note = f"{job.error.code}: {job.error.message}"
        for entry in (job.dest.inlined_responses if job.dest else None) or []:
            custom_id = (entry.metadata or {}).get(KEY)
            if custom_id is None:
                results.unreadable.append(entry.model_dump_json(exclude_none=True)[:2000])
                continue
            if entry.error is not None:
                results.errors[custom_id] = _job_error(self.name, entry.error)
                continue
            try:
                if entry.response is None:
                    raise ValueError("neither a response nor an error")
                answer = chat_answer(self.judge.read_response(entry.response))
            except MALFORMED_ANSWER_ERRORS as exc:
                results.unreadable.append(entry.model_dump_json(exclude_none=True)[:2000])
                results.errors[custom_id] = malformed_answer(self.name, exc, None)
                continue
            answer["extra"] = {**answer["extra"], "batch": batch_id}
            results.answers[custom_id] = answer
        return results


def _job_error(name: str, error: types.JobError) -> ProviderError:
    """An error line: google.rpc codes INVALID_ARGUMENT (3), NOT_FOUND (5), FAILED_PRECONDITION
    (9) and PERMISSION_DENIED (7) are permanent, the others (INTERNAL, UNAVAILABLE, ...) not."""
    code = error.code or 0
    return ProviderError(
        f"{name}: request failed in the job ({code}: {error.message or 'no message'})",
        transient=code not in (3, 5, 7, 9),
        kind="bad_request" if code == 3 else "batch_error",
    )
