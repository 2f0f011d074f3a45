"""Gemini's batch mode in the fake: `:batchGenerateContent` with inline requests and
`/{version}/batches[/{id}[:cancel]]`, as long-running operations (an expired job has no output)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from harness.fake_api.batches import BatchBook, Job
from harness.fake_api.gemini import gemini_error, parse_gemini
from harness.fake_api.state import FakeState, ParsedRequest, Reply

STATE = {
    "pending": "BATCH_STATE_PENDING",
    "running": "BATCH_STATE_RUNNING",
    "completed": "BATCH_STATE_SUCCEEDED",
    "expired": "BATCH_STATE_EXPIRED",
    "cancelled": "BATCH_STATE_CANCELLED",
    "failed": "BATCH_STATE_FAILED",
}
INLINE_LIMIT = 20 * 1024 * 1024  # the API's limit on a request with inline requests
GRPC_CODE = {400: 3, 404: 5, 429: 8, 500: 13, 503: 14}


def _time(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _operation(job: Job, book: BatchBook) -> dict[str, Any]:
    counts = book.counts(job)
    metadata: dict[str, Any] = {
        "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
        "model": f"models/{job.metadata['model']}",
        "displayName": job.metadata.get("display_name", ""),
        "createTime": _time(job.created),
        "updateTime": _time(job.finished or job.created),
        "batchStats": {
            "requestCount": str(counts["total"]),
            "successfulRequestCount": str(counts["completed"]),
            "failedRequestCount": str(counts["failed"]),
            "pendingRequestCount": str(counts["total"] - counts["completed"] - counts["failed"]),
        },
        "state": STATE[job.status],
        "name": job.id,
    }
    if job.finished:
        metadata["endTime"] = _time(job.finished)
    if job.status == "completed":
        metadata["output"] = {"inlinedResponses": {"inlinedResponses": _responses(job)}}
    return {"name": job.id, "metadata": metadata, "done": job.finished is not None}


def _responses(job: Job) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for custom_id, _ in job.requests:
        kind, value = job.outcome[custom_id]
        entry: dict[str, Any] = {"metadata": job.metadata["request_metadata"][custom_id]}
        if kind == "answer":
            entry["response"] = value
        elif kind == "unreadable":  # a response with neither candidates nor feedback
            entry["response"] = {"usageMetadata": value.get("usageMetadata", {})}
        else:
            reply: Reply = value
            error = gemini_error(reply)["error"]
            entry["error"] = {"code": GRPC_CODE.get(reply.status, 2), "message": error["message"]}
        out.append(entry)
    return out


def _requests(
    model: str, body: dict[str, Any]
) -> tuple[list[tuple[str, ParsedRequest | Reply]], dict[str, Any]]:
    """The job's requests with an id each (their order), and each one's metadata."""
    config = (body.get("batch") or {}).get("inputConfig") or {}
    listed = (config.get("requests") or {}).get("requests")
    if not isinstance(listed, list) or not listed:
        raise Reply(400, "batch.inputConfig.requests.requests must list the requests")
    requests: list[tuple[str, ParsedRequest | Reply]] = []
    metadata: dict[str, Any] = {}
    for index, entry in enumerate(listed):
        custom_id = str(index)
        request = entry.get("request") if isinstance(entry, dict) else None
        if not isinstance(request, dict):
            raise Reply(400, f"requests[{index}].request is missing")
        metadata[custom_id] = entry.get("metadata") or {}
        inner_model = str(request.get("model") or model).removeprefix("models/")
        try:
            requests.append((custom_id, parse_gemini(inner_model, request)))
        except Reply as reply:
            requests.append((custom_id, reply))
    return requests, metadata


async def gemini_batch_create(
    request: web.Request, model: str, state: FakeState, book: BatchBook
) -> web.Response:
    raw = await request.read()
    if len(raw) > INLINE_LIMIT:
        reply = Reply(400, "Request payload size exceeds the limit: 20971520 bytes.")
        return web.json_response(gemini_error(reply), status=400)
    try:
        body = await request.json()
        requests, metadata = _requests(model, body)
    except Reply as reply:
        return web.json_response(gemini_error(reply), status=reply.status)
    meta = {
        "model": model,
        "display_name": (body.get("batch") or {}).get("displayName", ""),
        "request_metadata": metadata,
    }
    job = book.add_job(Job(f"batches/{book.new_id('')}", "gemini", time.time(), requests, meta))
    return web.json_response(_operation(job, book))


Handler = Callable[[web.Request], Awaitable[web.Response]]


def gemini_batch_handlers(state: FakeState, book: BatchBook) -> dict[str, Handler]:
    """The handlers of /{version}/batches (`get`, `list`, `cancel`)."""

    def not_found(name: str) -> web.Response:
        reply = Reply(404, f"Batch {name} not found.")
        return web.json_response(gemini_error(reply), status=404)

    async def get(request: web.Request) -> web.Response:
        name = f"batches/{request.match_info['batch_id']}"
        job = book.jobs.get(name)
        if job is None:
            return not_found(name)
        return web.json_response(_operation(book.advance(job, state), book))

    async def listing(request: web.Request) -> web.Response:
        size = int(request.query.get("pageSize", "50"))
        start = int(request.query.get("pageToken") or 0)
        jobs = [j for j in reversed(book.jobs.values()) if j.api == "gemini"]
        page = jobs[start : start + size]
        answer: dict[str, Any] = {"operations": [_operation(j, book) for j in page]}
        if start + size < len(jobs):
            answer["nextPageToken"] = str(start + size)
        return web.json_response(answer)

    async def cancel(request: web.Request) -> web.Response:
        name = f"batches/{request.match_info['batch_id']}"
        job = book.jobs.get(name)
        if job is None:
            return not_found(name)
        if job.finished is None:
            job.status, job.finished = "cancelled", time.time()
        return web.json_response({})

    return {"get": get, "list": listing, "cancel": cancel}


def add_gemini_batch_routes(app: web.Application, handlers: dict[str, Handler]) -> None:
    """After OpenAI's routes: requests to /v1/batches from google-genai reach these handlers
    through OpenAI's (`is_gemini`)."""
    app.router.add_get("/{version}/batches", handlers["list"])
    app.router.add_get("/{version}/batches/{batch_id}", handlers["get"])
    app.router.add_post("/{version}/batches/{batch_id}:cancel", handlers["cancel"])


def is_gemini(request: web.Request) -> bool:
    """Whether a request to a path both APIs use (`/v1/batches`) comes from google-genai."""
    return "x-goog-api-key" in request.headers or "x-goog-api-client" in request.headers
