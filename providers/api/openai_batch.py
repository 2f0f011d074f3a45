"""OpenAI's Batch API (or a compatible server's): the requests as one JSONL file per job, each
line's `custom_id` the request's cache key, the harness's label in the job's metadata."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Final, Protocol

import openai
from openai.types.chat import ChatCompletion
from pydantic import ValidationError

from harness.core.errors import DatasetError
from harness.core.files import parse_json
from harness.core.types import ChatRequest, ChatResponse, ProviderError
from providers.api._shared import MALFORMED_ANSWER_ERRORS, malformed_answer, status_error
from providers.base import chat_answer
from providers.batch import BatchApi, BatchProgress, BatchResults


class ChatCompletionsJudge(Protocol):
    """What the adapter uses of the chat-completions judges (providers.api.openai_chat)."""

    @property
    def model(self) -> str: ...

    @property
    def key_env(self) -> str: ...

    def request_body(self, request: ChatRequest) -> dict[str, Any]: ...

    def read_completion(self, completion: ChatCompletion) -> ChatResponse: ...

    def batch_client(self) -> tuple[openai.AsyncOpenAI, str | None]: ...

    def sdk_errors(self, url: str | None, label: str) -> AbstractContextManager[None]: ...


ENDPOINT: Final = "/v1/chat/completions"
LABEL_KEY = "bgm_judge"
FINISHED = frozenset({"completed", "expired", "cancelled", "failed"})
LISTED_BATCHES = 1000  # how far back `find` looks for a job with the label


class OpenAIBatchApi(BatchApi):
    name = "OpenAI Batch API"
    max_requests = 50_000
    max_bytes = 190 * 1024 * 1024  # the API takes input files up to 200 MB

    judge: ChatCompletionsJudge

    def _line(self, custom_id: str, request: ChatRequest) -> bytes:
        body = self.judge.request_body(request)
        body.update(body.pop("extra_body", None) or {})  # the SDK merges it online
        line = {"custom_id": custom_id, "method": "POST", "url": ENDPOINT, "body": body}
        return json.dumps(line, ensure_ascii=False).encode("utf-8") + b"\n"

    def size(self, request: ChatRequest) -> int:
        return len(self._line("0" * 64, request))

    async def submit(self, entries: list[tuple[str, ChatRequest]], label: str) -> str:
        data = b"".join(self._line(custom_id, request) for custom_id, request in entries)
        client, url = self.judge.batch_client()
        with self._errors(url):
            uploaded = await client.files.create(file=(f"{label}.jsonl", data), purpose="batch")
            batch = await client.batches.create(
                input_file_id=uploaded.id,
                endpoint=ENDPOINT,
                completion_window="24h",
                metadata={LABEL_KEY: label},
            )
        return batch.id

    async def find(self, label: str) -> str | None:
        client, url = self.judge.batch_client()
        seen = 0
        with self._errors(url):
            async for batch in client.batches.list(limit=100):
                if (batch.metadata or {}).get(LABEL_KEY) == label:
                    return batch.id
                seen += 1
                if seen >= LISTED_BATCHES:
                    break
        return None

    async def progress(self, batch_id: str) -> BatchProgress:
        client, url = self.judge.batch_client()
        with self._errors(url):
            batch = await client.batches.retrieve(batch_id)
        counts = batch.request_counts
        return BatchProgress(
            status=batch.status,
            finished=batch.status in FINISHED,
            total=counts.total if counts else None,
            done=counts.completed if counts else None,
            failed=counts.failed if counts else None,
        )

    async def results(self, batch_id: str) -> BatchResults:
        client, url = self.judge.batch_client()
        results = BatchResults()
        with self._errors(url):
            batch = await client.batches.retrieve(batch_id)
            for file_id in (batch.output_file_id, batch.error_file_id):
                if file_id:
                    content = await client.files.content(file_id)
                    for line in content.text.splitlines():
                        if line.strip():
                            self._read_line(line, batch_id, results)
        if batch.status == "failed" and batch.errors and batch.errors.data:
            results.note = "; ".join(f"{e.code}: {e.message}" for e in batch.errors.data)[:300]
        return results

    def _read_line(self, line: str, batch_id: str, results: BatchResults) -> None:
        """One output line into `results`; a line of any other shape (the output file is
        read as untrusted) is kept as unreadable, and costs that line only."""
        try:
            entry = parse_json(line, "the batch's output file")
            custom_id = entry["custom_id"]
            if not isinstance(custom_id, str):
                raise TypeError("custom_id is not a string")
            response = entry.get("response") or {}
            error = entry.get("error") or {}
            if not isinstance(response, dict) or not isinstance(error, dict):
                raise TypeError("response and error must be objects")
        except (*MALFORMED_ANSWER_ERRORS, DatasetError):
            results.unreadable.append(line)
            return
        status = response.get("status_code")
        if isinstance(status, bool):
            status = None
        if status == 200:
            try:
                completion = ChatCompletion.model_validate(response.get("body"))
                answer = chat_answer(self.judge.read_completion(completion))
            except (ValidationError, *MALFORMED_ANSWER_ERRORS) as exc:
                results.unreadable.append(line)
                results.errors[custom_id] = malformed_answer(self.name, exc, None)
                return
            answer["extra"] = {**answer["extra"], "batch": batch_id}
            results.answers[custom_id] = answer
        elif isinstance(status, int):
            body = response.get("body") or {}
            found = body.get("error") if isinstance(body, dict) else None
            message = found.get("message") if isinstance(found, dict) else None
            results.errors[custom_id] = status_error(
                status,
                str(message or body),
                provider=self.name,
                model=self.judge.model,
                key_env=self.judge.key_env,
                url=None,
            )
        else:
            code = str(error.get("code") or "batch_error")
            results.errors[custom_id] = ProviderError(
                f"{self.name}: {code}: {error.get('message') or 'no answer'}",
                transient=True,
                kind="batch_expired" if code == "batch_expired" else "batch_error",
            )

    @contextmanager
    def _errors(self, url: str | None) -> Iterator[None]:
        """SDK errors as ProviderErrors (a 404 here: the server has no Batch API)."""
        with self.judge.sdk_errors(url, self.name):
            try:
                yield
            except openai.APIStatusError as exc:
                if exc.status_code not in (404, 405):
                    raise
                raise ProviderError(
                    f"{self.name}: the server at {url or 'api.openai.com'} has no batch "
                    f"endpoint ({exc.status_code}); run without batch: true",
                    transient=False,
                    kind="not_found",
                ) from None
