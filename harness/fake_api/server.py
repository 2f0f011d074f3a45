"""The fake API's aiohttp application, `FakeServer` (a background thread) and its command line."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import hashlib
import json
import logging
import threading
import time
from typing import Any

from aiohttp import web

from harness.fake_api import faults
from harness.fake_api.answers import audio_info, token_usage
from harness.fake_api.batches import BatchBook, answer_parsed
from harness.fake_api.gemini import GEMINI_PATH, gemini_error, parse_gemini
from harness.fake_api.gemini_batches import (
    add_gemini_batch_routes,
    gemini_batch_create,
    gemini_batch_handlers,
)
from harness.fake_api.openai import openai_error, parse_openai
from harness.fake_api.openai_batches import add_openai_batch_routes
from harness.fake_api.state import (
    ANSWER_MODES,
    FAULT_KINDS,
    KEY_HEADERS,
    MALFORMED_KINDS,
    REDACTED,
    FakeSettings,
    FakeState,
    Reply,
    RequestLog,
)

log = logging.getLogger("harness.fake_api")


def redacted_headers(request: web.Request) -> tuple[dict[str, str], str | None]:
    headers, key = {}, None
    for name, value in request.headers.items():
        lower = name.lower()
        if lower in KEY_HEADERS:
            key = value.removeprefix("Bearer ").strip()
            headers[lower] = REDACTED
        else:
            headers[lower] = value
    return headers, key or request.query.get("key")


def error_response(api: str, reply: Reply) -> web.Response:
    payload = gemini_error(reply) if api == "gemini" else openai_error(reply)
    headers = {}
    if reply.retry_after is not None:
        headers["Retry-After"] = f"{reply.retry_after:g}"
    return web.json_response(payload, status=reply.status, headers=headers)


def build_app(state: FakeState, book: BatchBook | None = None) -> web.Application:
    book = book if book is not None else BatchBook()
    gates: dict[int, asyncio.Semaphore] = {}  # max_concurrency -> its semaphore

    async def limited(request: web.Request) -> web.StreamResponse:
        """A request waits for a free slot when `max_concurrency` is set."""
        limit = state.settings.max_concurrency
        gate = gates.setdefault(limit, asyncio.Semaphore(limit)) if limit else None
        async with gate or contextlib.nullcontext():
            with state.handling():
                return await chat(request)

    async def chat(request: web.Request) -> web.StreamResponse:
        path = request.path
        match = GEMINI_PATH.match(path)
        if match and match["method"] == "batchGenerateContent":
            return await gemini_batch_create(request, match["model"], state, book)
        if match:
            api = "gemini"
            if match["method"] != "generateContent":
                raise web.HTTPNotFound(text=f"method {match['method']} is not faked")
        elif path.endswith("/chat/completions"):
            api = "openai"
        else:
            raise web.HTTPNotFound(text=f"no fake endpoint at {path}")
        raw = await request.read()
        headers, key = redacted_headers(request)
        body_sha = hashlib.sha256(path.encode() + b"\0" + raw).hexdigest()
        entry = RequestLog(
            api=api,
            path=path,
            model=match["model"] if match else "",
            body_sha256=body_sha,
            arrival=state.arrive(body_sha),
            headers=headers,
            key_present=bool(key),
            arrived_s=time.time(),
        )
        try:
            response = await handle(request, state, api, raw, key, entry, book)
        except faults.Malformed as malformed:
            return faults.malformed_response(malformed.kind)
        except Reply as reply:
            entry.status = reply.status
            if entry.outcome == "answered":
                entry.outcome = f"error:{reply.status}"
            response = error_response(api, reply)
        except asyncio.CancelledError:  # the client went away: nothing was answered
            entry.status = 0
            if entry.outcome == "answered":
                entry.outcome = "abandoned"
            raise
        finally:
            entry.done_s = time.time()
            what = (api, path, entry.model, entry.arrival, entry.status, entry.outcome)
            log.debug("%s %s model=%s arrival=%d -> %d %s", *what)
            state.record(entry)
        response.headers.update(state.limit_headers(time.monotonic()))
        return response

    async def stats(_: web.Request) -> web.Response:
        return web.json_response(state.stats() | book.stats())

    async def requests(request: web.Request) -> web.Response:
        limit = int(request.query.get("limit", "1000"))
        entries = state.requests()[-limit:]
        return web.json_response([dataclasses.asdict(e) for e in entries])

    async def reset(_: web.Request) -> web.Response:
        state.reset()
        book.reset()
        return web.json_response({"ok": True})

    async def settings(request: web.Request) -> web.Response:
        if request.method == "POST":
            changes = await request.json()
            try:
                state.settings = dataclasses.replace(state.settings, **changes)
            except (TypeError, ValueError) as exc:
                raise web.HTTPBadRequest(text=str(exc)) from None
        return web.json_response(state.settings.public())

    async def health(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def models(_: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "fake", "object": "model"}]})

    app = web.Application(client_max_size=256 * 1024 * 1024)
    app.router.add_get("/_stats", stats)
    app.router.add_get("/_requests", requests)
    app.router.add_post("/_reset", reset)
    app.router.add_route("*", "/_settings", settings)
    app.router.add_get("/health", health)
    app.router.add_get("/v1/models", models)
    gemini_handlers = gemini_batch_handlers(state, book)
    add_openai_batch_routes(app, state, book, gemini_handlers)
    add_gemini_batch_routes(app, gemini_handlers)
    app.router.add_post("/{tail:.*}", limited)
    return app


async def handle(
    request: web.Request,
    state: FakeState,
    api: str,
    raw: bytes,
    key: str | None,
    entry: RequestLog,
    book: BatchBook,
) -> web.StreamResponse:
    settings = state.settings
    if settings.latency_s:
        await asyncio.sleep(settings.latency_s)
    if settings.api_key is not None and key != settings.api_key:
        entry.outcome = "bad_key"
        # Gemini answers a wrong key with 400 INVALID_ARGUMENT (reason API_KEY_INVALID).
        status = 400 if api == "gemini" else 401
        raise Reply(
            status, "API key not valid. Please pass a valid API key.", reason="API_KEY_INVALID"
        )
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise Reply(400, "the request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise Reply(400, "the request body must be a JSON object")
    parsed = parse_gemini(entry.model, body) if api == "gemini" else parse_openai(body)
    for name in ("model", "system", "user_text", "json_mode", "temperature", "roles", "logprobs"):
        setattr(entry, name, getattr(parsed, name))
    entry.audio_parts, entry.audio_formats = len(parsed.audio), [f for _, f in parsed.audio]
    entry.response_schema, entry.fields = parsed.schema, sorted(body)
    undecodable: Reply | None = None
    try:
        seconds, entry.audio_sample_rates = audio_info(parsed.audio)
    except Reply as reply:
        entry.audio_decodable, undecodable, seconds = False, reply, 0.0
    text_tokens, audio_tokens, _ = token_usage(api, parsed, seconds, "")
    await faults.inject(request, state, parsed, entry, text_tokens + audio_tokens)
    if undecodable is not None:
        raise undecodable
    entry.audio_seconds = round(seconds, 3)
    mode, payload, entry.answer = answer_parsed(api, parsed, state, seconds)
    if settings.model is not None:  # a misconfigured server answers as another model
        payload["modelVersion" if api == "gemini" else "model"] = settings.model
    book.pay(parsed)
    if entry.outcome == "answered":
        entry.outcome = f"answered:{mode}"
    return web.json_response(payload)


class FakeServer:
    """The fake API on 127.0.0.1 in a background thread; a context manager for tests."""

    def __init__(
        self, settings: FakeSettings | None = None, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.state = FakeState(settings or FakeSettings())
        self.book = BatchBook()
        self.host, self.port = host, port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    gemini_base_url = url

    @property
    def openai_base_url(self) -> str:
        return self.url + "/v1"

    @property
    def settings(self) -> FakeSettings:
        return self.state.settings

    def configure(self, **changes: Any) -> None:
        self.state.settings = dataclasses.replace(self.state.settings, **changes)

    def stats(self) -> dict[str, Any]:
        return self.state.stats() | self.book.stats()

    def requests(self) -> list[RequestLog]:
        return self.state.requests()

    def reset(self) -> None:
        self.state.reset()
        self.book.reset()

    def start(self) -> FakeServer:
        started = threading.Event()
        failure: list[BaseException] = []

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._start_site())
            except BaseException as exc:
                failure.append(exc)
                started.set()
                loop.close()
                return
            started.set()
            loop.run_forever()
            assert self._runner is not None
            loop.run_until_complete(self._runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=serve, name="fake-api-server", daemon=True)
        self._thread.start()
        started.wait()
        if failure:
            raise failure[0]
        return self

    async def _start_site(self) -> None:
        app = build_app(self.state, self.book)
        self._runner = web.AppRunner(
            app, access_log=None, handler_cancellation=True, shutdown_timeout=0.5
        )
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port).start()
        if self.port == 0:
            self.port = int(self._runner.addresses[0][1])

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        self._loop = self._thread = None

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


FLAGS = (  # flag, FakeSettings field, type, help
    ("--latency", "latency_s", float, "seconds before each answer"),
    ("--fault-rate", "fault_rate", float, "share of requests faulted"),
    ("--fail-first", "fail_first", int, "fault the first N arrivals of every body"),
    ("--retry-after", "retry_after_s", float, "Retry-After of a 429"),
    ("--slow", "slow_s", float, "stall of a 'timeout' fault"),
    ("--rpm", "rpm", float, "requests-per-minute limit"),
    ("--tpm", "tpm", float, "tokens-per-minute limit"),
    ("--rpm-window", "rpm_window_s", float, "seconds of the rpm and tpm window"),
    ("--seed", "seed", int, "seed of the fault draws"),
    ("--max-concurrency", "max_concurrency", int, "handle at most N requests at once (vLLM)"),
    ("--batch-latency", "batch_latency_s", float, "seconds a batch job stays pending"),
)


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, FakeSettings]:
    parser = argparse.ArgumentParser(
        prog="python -m harness.fake_api",
        description="Local fake of the Gemini and OpenAI chat APIs (deterministic scores, faults).",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    defaults = FakeSettings()
    for flag, dest, kind, text in FLAGS:
        parser.add_argument(flag, dest=dest, type=kind, default=getattr(defaults, dest), help=text)
    parser.add_argument(
        "--faults",
        default=",".join(FAULT_KINDS),
        help=f"comma-separated mix of transient faults ({','.join(FAULT_KINDS)}) and malformed "
        f"HTTP 200 answers ({','.join(MALFORMED_KINDS)}; 'malformed' for all of them)",
    )
    parser.add_argument("--answer", default="score", choices=ANSWER_MODES)
    parser.add_argument("--prefix-cache", action="store_true", help="report prefix cache hits")
    parser.add_argument("--verbose", action="store_true", help="log every request")
    args = parser.parse_args(argv)
    fields = {field.name for field in dataclasses.fields(FakeSettings)}
    return args, FakeSettings(**{k: v for k, v in vars(args).items() if k in fields})


def main(argv: list[str] | None = None) -> None:
    try:
        args, settings = parse_args(argv)
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO)
    with FakeServer(settings, args.host, args.port) as server:
        print(f"fake API server on {server.url}", flush=True)
        print(f"  GEMINI_BASE_URL={server.gemini_base_url}", flush=True)
        print(f"  OPENAI_BASE_URL={server.openai_base_url}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
