"""The faults the fake API injects: statuses forced by model name, the rate limits, and
transient faults or malformed HTTP 200 answers for a share or the first arrivals of a body."""

from __future__ import annotations

import asyncio
import math
import re
import time

from aiohttp import web

from harness.fake_api.answers import BIG, digest
from harness.fake_api.state import (
    MALFORMED_KINDS,
    FakeSettings,
    FakeState,
    ParsedRequest,
    Reply,
    RequestLog,
)

ERROR_MODEL = re.compile(r"error-(\d{3})")
ANSWER_MODEL = re.compile(r"answer-([a-z_]+)")


class Malformed(Exception):
    """Answer this request with a malformed HTTP 200 of `kind`."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


HTML_PAGE = "<html><head><title>502</title></head><body>upstream hiccup</body></html>"


def malformed_response(kind: str) -> web.Response:
    """An HTTP 200 that is not a usable answer of either API."""
    json_type = "application/json"
    if kind == "html":
        return web.Response(text=HTML_PAGE, content_type="text/html")
    if kind == "html_json":
        return web.Response(text=HTML_PAGE, content_type=json_type)
    if kind == "not_utf8":
        body = b'{"candidates": [{"content": {"parts": [{"text": "caf\xe9 \xff\xfe"}]}}]}'
        return web.Response(body=body, content_type=json_type, charset="utf-8")
    if kind == "wrong_shape":
        return web.Response(text='[{"choices": [], "candidates": []}]', content_type=json_type)
    if kind == "huge_number":
        return web.Response(text='{"padding": ' + "9" * BIG + "}", content_type=json_type)
    assert kind == "deep_nesting", kind
    text = '{"padding": ' + "[" * BIG + "]" * BIG + "}"
    return web.Response(text=text, content_type=json_type)


def chosen_fault(settings: FakeSettings, body_sha: str, arrival: int) -> str | None:
    if not settings.faults:
        return None
    hashed = digest(str(settings.seed), body_sha, str(arrival))
    if arrival > settings.fail_first:
        draw = int.from_bytes(hashed[:4], "big") / 2**32
        if draw >= settings.fault_rate:
            return None
    return settings.faults[hashed[4] % len(settings.faults)]


def answer_mode(parsed: ParsedRequest, settings: FakeSettings) -> str:
    """The answer mode: from the model name (`...answer-malformed...`), else the settings'."""
    found = ANSWER_MODEL.search(parsed.model)
    return found.group(1) if found else settings.answer


async def inject(
    request: web.Request, state: FakeState, parsed: ParsedRequest, entry: RequestLog, tokens: int
) -> None:
    """Raise the fault this request of `tokens` prompt tokens meets (as a Reply, or by
    dropping the connection), or return to let it be answered (after a stall, for a
    `timeout` fault)."""
    settings = state.settings
    forced = ERROR_MODEL.search(parsed.model)
    if forced:
        status = int(forced.group(1))
        entry.outcome = f"model:{status}"
        retry_after = settings.retry_after_s if status in (429, 503) else None
        if status == 404:
            raise Reply(404, f"models/{parsed.model} is not found or not supported")
        raise Reply(status, f"the fake server always answers {status} for this model", retry_after)

    wait = state.admit(time.monotonic(), tokens)
    if wait is not None:
        entry.outcome = "rpm"
        raise Reply(429, "rate limit reached (requests or tokens)", math.ceil(wait * 100) / 100)

    fault = chosen_fault(settings, entry.body_sha256, entry.arrival)
    if fault is not None:
        entry.outcome = f"fault:{fault}"
        if fault == "drop":
            entry.status = 0
            if request.transport is not None:
                request.transport.close()
            raise web.HTTPServiceUnavailable()  # never reaches the client: it is gone
        if fault == "timeout":
            entry.status = 0  # stays so if the client gives up first
            await asyncio.sleep(settings.slow_s)
            entry.status = 200
        elif fault in MALFORMED_KINDS:
            raise Malformed(fault)
        elif fault == "429":
            raise Reply(429, "Resource has been exhausted (fake).", settings.retry_after_s)
        else:
            status = int(fault)
            retry_after = settings.retry_after_s if status == 503 else None
            raise Reply(status, f"fake transient server error {status}", retry_after)
