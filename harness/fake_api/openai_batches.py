"""OpenAI's Batch API in the fake: `/v1/files[/{id}[/content]]` and `/v1/batches[/{id}[/cancel]]`,
in the wire format the openai SDK's `FileObject` and `Batch` read."""

from __future__ import annotations

import json
import time
from typing import Any

from aiohttp import web

from harness.fake_api.batches import BatchBook, Job
from harness.fake_api.gemini_batches import Handler, is_gemini
from harness.fake_api.openai import openai_error, parse_openai
from harness.fake_api.state import FakeState, ParsedRequest, Reply

CHAT_ENDPOINT = "/v1/chat/completions"
STATUS = {"pending": "validating", "running": "in_progress"}
EXPIRED_LINE = "This request could not be executed before the completion window expired."


def _file_object(file_id: str, name: str, size: int, created: float) -> dict[str, Any]:
    return {
        "id": file_id,
        "object": "file",
        "bytes": size,
        "created_at": int(created),
        "filename": name,
        "purpose": "batch_output" if name.endswith("_output.jsonl") else "batch",
        "status": "processed",
    }


def _batch_object(job: Job, book: BatchBook) -> dict[str, Any]:
    status = STATUS.get(job.status, job.status)
    counts = book.counts(job)
    finished = int(job.finished) if job.finished else None
    return {
        "id": job.id,
        "object": "batch",
        "endpoint": CHAT_ENDPOINT,
        "errors": {"object": "list", "data": job.errors} if job.errors else None,
        "input_file_id": job.metadata.get("input_file_id", ""),
        "completion_window": "24h",
        "status": status,
        "output_file_id": job.files.get("output"),
        "error_file_id": job.files.get("error"),
        "created_at": int(job.created),
        "in_progress_at": int(job.created) if job.status != "pending" else None,
        "expires_at": int(job.created) + 86400,
        **{
            f"{end}_at": finished if status == end else None
            for end in ("completed", "expired", "failed", "cancelled")
        },
        "request_counts": counts,
        "metadata": job.metadata.get("user") or None,
    }


def _read_input(content: bytes) -> tuple[list[tuple[str, ParsedRequest | Reply]], list[Any]]:
    """The requests of an input file, and the validation errors that fail the whole job."""
    requests: list[tuple[str, ParsedRequest | Reply]] = []
    errors: list[dict[str, Any]] = []
    seen: set[str] = set()
    for number, line in enumerate(content.decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            custom_id, body = entry["custom_id"], entry["body"]
            if entry.get("method") != "POST" or entry.get("url") != CHAT_ENDPOINT:
                raise ValueError(f"method POST and url {CHAT_ENDPOINT} are required")
        except (ValueError, KeyError, TypeError) as exc:
            errors.append({"code": "invalid_request", "line": number, "message": str(exc)})
            continue
        if custom_id in seen:
            message = f"The custom_id {custom_id!r} is not unique"
            errors.append({"code": "duplicate_custom_id", "line": number, "message": message})
            continue
        seen.add(custom_id)
        try:
            requests.append((custom_id, parse_openai(body)))
        except Reply as reply:
            requests.append((custom_id, reply))
    return requests, errors


def _output_files(job: Job, book: BatchBook) -> None:
    """Write the job's output and error files once it has finished."""
    output: list[str] = []
    failed: list[str] = []
    for number, (custom_id, _) in enumerate(job.requests):
        kind, value = job.outcome.get(custom_id, ("expired", None))
        line: dict[str, Any] = {"id": f"batch_req_{job.id}_{number}", "custom_id": custom_id}
        line |= {"response": None, "error": None}
        if kind in ("answer", "unreadable"):
            line["response"] = {"status_code": 200, "request_id": f"req_{number}", "body": value}
            text = json.dumps(line)
            output.append(text[: len(text) // 2] if kind == "unreadable" else text)
            continue
        if kind == "error":
            body = openai_error(value)
            line["response"] = {"status_code": value.status, "request_id": "", "body": body}
        else:
            line["error"] = {"code": "batch_expired", "message": EXPIRED_LINE}
        failed.append(json.dumps(line))
    for name, lines in (("output", output), ("error", failed)):
        if lines:
            file_id = book.new_id("file-")
            content = ("\n".join(lines) + "\n").encode()
            book.files[file_id] = (f"{job.id}_{name}.jsonl", content)
            job.files[name] = file_id


def add_openai_batch_routes(
    app: web.Application, state: FakeState, book: BatchBook, gemini: dict[str, Handler]
) -> None:
    """The routes under [/prefix]/v1/files and /v1/batches (google-genai's requests to
    `/v1/batches` go on to `gemini`'s handlers)."""

    def error(status: int, message: str) -> web.Response:
        return web.json_response(openai_error(Reply(status, message)), status=status)

    async def upload(request: web.Request) -> web.Response:
        form = await request.post()
        upload = form.get("file")
        if form.get("purpose") != "batch" or not isinstance(upload, web.FileField):
            return error(400, "a file with purpose 'batch' is required")
        content = upload.file.read()
        file_id = book.new_id("file-")
        book.files[file_id] = (upload.filename, content)
        return web.json_response(_file_object(file_id, upload.filename, len(content), time.time()))

    async def file_info(request: web.Request) -> web.Response:
        file_id = request.match_info["file_id"]
        if file_id not in book.files:
            return error(404, "No such File object")
        name, content = book.files[file_id]
        return web.json_response(_file_object(file_id, name, len(content), time.time()))

    async def file_content(request: web.Request) -> web.Response:
        found = book.files.get(request.match_info["file_id"])
        if found is None:
            return error(404, "No such File object")
        return web.Response(body=found[1], content_type="application/octet-stream")

    async def create(request: web.Request) -> web.Response:
        body = await request.json()
        found = book.files.get(str(body.get("input_file_id")))
        if found is None:
            return error(400, "input_file_id does not name an uploaded file")
        if body.get("endpoint") != CHAT_ENDPOINT or body.get("completion_window") != "24h":
            return error(400, f"endpoint must be {CHAT_ENDPOINT} and completion_window 24h")
        requests, problems = _read_input(found[1])
        meta = {"input_file_id": body["input_file_id"], "user": body.get("metadata") or {}}
        job = book.add_job(Job(book.new_id("batch_"), "openai", time.time(), requests, meta))
        if problems:
            job.status, job.errors, job.finished = "failed", problems, time.time()
        return web.json_response(_batch_object(job, book))

    async def retrieve(request: web.Request) -> web.Response:
        if is_gemini(request):
            return await gemini["get"](request)
        job = book.jobs.get(request.match_info["batch_id"])
        if job is None:
            return error(404, "No such Batch object")
        finished = job.finished
        book.advance(job, state)
        if job.finished and not finished:
            _output_files(job, book)
        return web.json_response(_batch_object(job, book))

    async def listing(request: web.Request) -> web.Response:
        if is_gemini(request):
            return await gemini["list"](request)
        limit = int(request.query.get("limit", "20"))
        after = request.query.get("after")
        jobs = [j for j in reversed(book.jobs.values()) if j.api == "openai"]
        if after:
            ids = [j.id for j in jobs]
            jobs = jobs[ids.index(after) + 1 :] if after in ids else []
        page = jobs[:limit]
        return web.json_response(
            {
                "object": "list",
                "data": [_batch_object(j, book) for j in page],
                "first_id": page[0].id if page else None,
                "last_id": page[-1].id if page else None,
                "has_more": len(jobs) > limit,
            }
        )

    async def cancel(request: web.Request) -> web.Response:
        job = book.jobs.get(request.match_info["batch_id"])
        if job is None:
            return error(404, "No such Batch object")
        if job.finished is None:
            job.status, job.finished = "cancelled", time.time()
            _output_files(job, book)
        return web.json_response(_batch_object(job, book))

    prefix = "/{prefix:(?:.*/)?}v1"
    app.router.add_post(prefix + "/files", upload)
    app.router.add_get(prefix + "/files/{file_id}", file_info)
    app.router.add_get(prefix + "/files/{file_id}/content", file_content)
    app.router.add_post(prefix + "/batches", create)
    app.router.add_get(prefix + "/batches", listing)
    app.router.add_get(prefix + "/batches/{batch_id}", retrieve)
    app.router.add_post(prefix + "/batches/{batch_id}/cancel", cancel)
