"""A local stand-in for the Gemini and OpenAI chat APIs, for tests and offline smoke checks.

It speaks `POST /{version}/models/{model}:generateContent` (Gemini) and
`POST [/prefix]/v1/chat/completions` (OpenAI and OpenAI-compatible servers such as vLLM)
closely enough for the real SDKs, answers a deterministic score derived from the request
(prompt text and audio bytes), and injects faults on demand:

- transient faults (`--faults`): 429 with Retry-After, 500, 503, `timeout` (the answer is
  held back for `--slow` seconds), `drop` (the connection is closed without an answer);
  either for a share of requests (`--fault-rate`, decided per request body and arrival, so
  a run is reproducible whatever the concurrency) or for the first N arrivals of every
  distinct request body (`--fail-first`);
- answer modes (`--answer`): score, malformed, out_of_range, fenced, prose, wrong_keys,
  blocked, empty;
- a fixed latency, and a requests-per-minute limit answered with 429 + Retry-After;
- model names: one containing `error-<status>` (e.g. `error-404`) is always answered with
  that status, one containing `answer-<mode>` (e.g. `fake-answer-malformed`) with that mode.

Every request is recorded (model, arrival count of its body, audio present and decodable,
JSON mode asked for, headers with keys redacted) and counted; `GET /_stats` and
`GET /_requests` expose that, `POST /_settings` changes the settings, `POST /_reset` clears.

In-process (tests): `with FakeServer(FakeSettings(fail_first=1)) as server: ...` runs it on
a free port in a background thread. As a process:
`python -m harness.fake_server --port 8765 --latency 0.2 --fault-rate 0.2 --rpm 600`.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import binascii
import collections
import contextlib
import dataclasses
import hashlib
import io
import json
import logging
import math
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import soundfile
from aiohttp import web

log = logging.getLogger("harness.fake_server")

FAULT_KINDS = ("429", "500", "503", "timeout", "drop")
ANSWER_MODES = (
    "score",
    "malformed",
    "out_of_range",
    "fenced",
    "prose",
    "wrong_keys",
    "blocked",
    "empty",
)
KEY_HEADERS = frozenset({"x-goog-api-key", "authorization", "api-key", "x-api-key"})
REDACTED = "[REDACTED]"
# Roughly what the real services bill per second of input audio.
AUDIO_TOKENS_PER_SECOND = {"gemini": 32, "openai": 10}
_ERROR_MODEL = re.compile(r"error-(\d{3})")
_ANSWER_MODEL = re.compile(r"answer-([a-z_]+)")
_GEMINI_PATH = re.compile(
    r"^(?:/.*)?/(?P<version>[^/]+)/models/(?P<model>[^/:]+):(?P<method>[A-Za-z]+)$"
)
_GEMINI_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}
_OPENAI_TYPE = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
}


@dataclass
class FakeSettings:
    latency_s: float = 0.0
    fault_rate: float = 0.0
    faults: tuple[str, ...] = FAULT_KINDS
    fail_first: int = 0
    retry_after_s: float = 1.0
    slow_s: float = 30.0
    rpm: float | None = None
    rpm_window_s: float = 60.0  # tests shrink the minute to keep the rpm limit fast
    answer: str = "score"
    api_key: str | None = None  # when set, requests with another key get 401
    seed: int = 0

    def __post_init__(self) -> None:
        self.faults = tuple(self.faults)
        unknown = set(self.faults) - set(FAULT_KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)} (known: {FAULT_KINDS})")
        if self.answer not in ANSWER_MODES:
            raise ValueError(f"unknown answer mode {self.answer!r} (known: {ANSWER_MODES})")
        if not 0.0 <= self.fault_rate <= 1.0:
            raise ValueError("fault_rate must be in [0, 1]")

    def public(self) -> dict[str, Any]:
        values = dataclasses.asdict(self)
        values["api_key"] = REDACTED if self.api_key else None
        return values


@dataclass
class RequestLog:
    """What arrived at the server for one request, and what it was answered."""

    api: str  # "gemini" or "openai"
    path: str
    model: str
    body_sha256: str
    arrival: int  # how many times this exact body has arrived, this one included
    headers: dict[str, str]
    key_present: bool
    system: str = ""
    user_text: str = ""
    audio_parts: int = 0
    audio_formats: list[str] = field(default_factory=list)
    audio_decodable: bool = True
    audio_seconds: float = 0.0
    audio_sample_rates: list[int] = field(default_factory=list)
    json_mode: str | None = None  # "schema", "object" or None (JSON asked for in the prompt)
    response_schema: dict[str, Any] | None = None
    temperature: float | None = None
    fields: list[str] = field(default_factory=list)  # top-level keys of the request body
    status: int = 200
    outcome: str = "answered"
    answer: str | None = None


@dataclass
class _Parsed:
    model: str
    system: str
    user_text: str
    audio: list[tuple[str, str]]  # (base64 data, format or mime type)
    json_mode: str | None
    schema: dict[str, Any] | None
    temperature: float | None


class _Reply(Exception):
    """An error answer, raised from anywhere in request handling."""

    def __init__(self, status: int, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.retry_after = status, message, retry_after


class FakeState:
    """Settings, request log and counters; shared between the server loop and test threads."""

    def __init__(self, settings: FakeSettings, max_log: int = 20_000) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._arrivals: collections.Counter[str] = collections.Counter()
        self._log: collections.deque[RequestLog] = collections.deque(maxlen=max_log)
        self._counts: collections.Counter[str] = collections.Counter()
        self._window: collections.deque[float] = collections.deque()

    def arrive(self, body_sha: str) -> int:
        with self._lock:
            self._arrivals[body_sha] += 1
            return self._arrivals[body_sha]

    def admit(self, now: float) -> float | None:
        """None if the request fits the rpm limit, else the seconds until it would."""
        rpm, window = self.settings.rpm, self.settings.rpm_window_s
        if not rpm:
            return None
        with self._lock:
            while self._window and now - self._window[0] >= window:
                self._window.popleft()
            if len(self._window) >= rpm:
                return max(0.01, window - (now - self._window[0]))
            self._window.append(now)
            return None

    def record(self, entry: RequestLog) -> None:
        with self._lock:
            self._log.append(entry)
            c = self._counts
            c["requests"] += 1
            c[f"api:{entry.api}"] += 1
            c[f"status:{entry.status}"] += 1
            c[f"outcome:{entry.outcome}"] += 1
            c[f"model:{entry.model}"] += 1
            c[f"json_mode:{entry.json_mode}"] += 1
            c["audio_parts"] += entry.audio_parts
            c["audio_undecodable"] += not entry.audio_decodable
            c["answered"] += entry.status == 200

    def requests(self) -> list[RequestLog]:
        with self._lock:
            return list(self._log)

    def stats(self) -> dict[str, Any]:
        with self._lock:
            counts = dict(self._counts)
            arrivals = list(self._arrivals.values())
        grouped: dict[str, dict[str, int]] = collections.defaultdict(dict)
        flat: dict[str, Any] = {}
        for name, value in counts.items():
            group, sep, key = name.partition(":")
            if sep:
                grouped[group][key] = value
            else:
                flat[name] = value
        return {
            "requests": flat.get("requests", 0),
            "answered": flat.get("answered", 0),
            "audio_parts": flat.get("audio_parts", 0),
            "audio_undecodable": flat.get("audio_undecodable", 0),
            "distinct_bodies": len(arrivals),
            "repeated_bodies": sum(1 for n in arrivals if n > 1),
            "max_arrivals": max(arrivals, default=0),
            **{group: dict(values) for group, values in grouped.items()},
            "settings": self.settings.public(),
        }

    def reset(self) -> None:
        with self._lock:
            self._arrivals.clear()
            self._log.clear()
            self._counts.clear()
            self._window.clear()


# ------------------------------------------------------------------ reading requests
def _redacted_headers(request: web.Request) -> tuple[dict[str, str], str | None]:
    headers, key = {}, None
    for name, value in request.headers.items():
        lower = name.lower()
        if lower in KEY_HEADERS:
            key = value.removeprefix("Bearer ").strip()
            headers[lower] = REDACTED
        else:
            headers[lower] = value
    return headers, key or request.query.get("key")


def _parse_gemini(model: str, body: dict[str, Any]) -> _Parsed:
    system_parts = (body.get("systemInstruction") or {}).get("parts") or []
    system = "".join(p.get("text", "") for p in system_parts)
    texts: list[str] = []
    audio: list[tuple[str, str]] = []
    for content in body.get("contents") or []:
        for part in content.get("parts") or []:
            if "text" in part:
                texts.append(part["text"])
            inline = part.get("inlineData") or part.get("inline_data")
            if inline is not None:
                audio.append(
                    (inline.get("data", ""), inline.get("mimeType") or inline.get("mime_type", ""))
                )
                texts.append("<audio>")
    config = body.get("generationConfig") or {}
    schema = config.get("responseJsonSchema") or config.get("responseSchema")
    json_mode = None
    if config.get("responseMimeType") == "application/json":
        json_mode = "schema" if schema else "object"
    return _Parsed(
        model, system, "".join(texts), audio, json_mode, schema, config.get("temperature")
    )


def _parse_openai(body: dict[str, Any]) -> _Parsed:
    model = body.get("model")
    messages = body.get("messages")
    if not isinstance(model, str) or not isinstance(messages, list):
        raise _Reply(400, "'model' and 'messages' are required")
    system: list[str] = []
    texts: list[str] = []
    audio: list[tuple[str, str]] = []
    for message in messages:
        content = message.get("content")
        pieces: list[dict[str, Any]] = (
            [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        )
        for piece in pieces:
            kind = piece.get("type")
            if kind == "text":
                (system if message.get("role") in ("system", "developer") else texts).append(
                    piece.get("text", "")
                )
            elif kind == "input_audio":
                data = piece.get("input_audio") or {}
                audio.append((data.get("data", ""), data.get("format", "")))
                texts.append("<audio>")
            elif kind == "audio_url":
                url = (piece.get("audio_url") or {}).get("url", "")
                header, _, data = url.partition(",")
                if not header.startswith("data:") or not header.endswith(";base64"):
                    raise _Reply(400, "audio_url must be a base64 data URL in this fake server")
                audio.append((data, header[5:].removesuffix(";base64")))
                texts.append("<audio>")
            else:
                raise _Reply(400, f"unsupported content part type {kind!r}")
    response_format = body.get("response_format") or {}
    kind = response_format.get("type")
    schema = None
    json_mode = None
    if kind == "json_schema":
        json_mode = "schema"
        schema = (response_format.get("json_schema") or {}).get("schema")
    elif kind == "json_object":
        json_mode = "object"
    return _Parsed(
        model, "".join(system), "".join(texts), audio, json_mode, schema, body.get("temperature")
    )


def _audio_info(audio: list[tuple[str, str]]) -> tuple[float, list[int]]:
    """Total duration and each part's sample rate; _Reply(400) for a part that does not
    decode as audio."""
    total, rates = 0.0, []
    for index, (data, _) in enumerate(audio):
        try:
            # Like the real services (proto3 JSON), standard or URL-safe base64 is accepted.
            standard = data.replace("-", "+").replace("_", "/")
            raw = base64.b64decode(standard + "=" * (-len(standard) % 4), validate=True)
            info = soundfile.info(io.BytesIO(raw))
        except (binascii.Error, ValueError, RuntimeError, soundfile.LibsndfileError) as exc:
            raise _Reply(400, f"audio part {index} could not be decoded: {exc}") from None
        total += info.frames / info.samplerate
        rates.append(int(info.samplerate))
    return total, rates


# ------------------------------------------------------------------ answers
def _digest(*pieces: str | bytes) -> bytes:
    digest = hashlib.sha256()
    for piece in pieces:
        digest.update(piece.encode() if isinstance(piece, str) else piece)
        digest.update(b"\0")
    return digest.digest()


def deterministic_score(parsed: _Parsed) -> float:
    """A score in [0, 10] that depends on the model, the prompt text and the audio bytes."""
    digest = _digest(parsed.model, parsed.system, parsed.user_text, *(a for a, _ in parsed.audio))
    return int.from_bytes(digest[:4], "big") % 101 / 10


def _clip_score(parsed: _Parsed, index: int) -> float:
    """A per-clip score for joint prompts: from the clip's own audio when it was sent, so the
    same clip gets similar standing whatever its position; else from its label index."""
    piece: str | bytes = parsed.audio[index][0] if index < len(parsed.audio) else str(index)
    digest = _digest(parsed.model, parsed.system, piece)
    return int.from_bytes(digest[:4], "big") % 101 / 10


def _answer_form(parsed: _Parsed) -> tuple[str, list[str]]:
    """What the prompt asks for ("score", "scores", "ranking", "rubric", "summary") and the
    clip labels of a joint prompt, read from the JSON schema or else from the prompt text."""
    schema = parsed.schema or {}
    props = schema.get("properties") or {}
    text = parsed.user_text
    if (props.get("scores") or {}).get("type") == "object":
        return "scores", list((props["scores"].get("properties") or {}).keys())
    if ((props.get("ranking") or {}).get("items") or {}).get("enum"):
        return "ranking", list((props["ranking"].get("items") or {}).get("enum") or [])
    if "vocals" in props or '"vocals":' in text:
        return "rubric", []
    if "summary" in props or '{"summary":' in text:
        return "summary", []
    if '{"scores":' in text:
        return "scores", re.findall(r'"([^"{}]+)": <score>', text)
    if '{"ranking":' in text:
        found = re.search(r"using each label \(([^)]*)\)", text)
        return "ranking", [label.strip() for label in found.group(1).split(",")] if found else []
    return "score", []


def _instance(schema: dict[str, Any], score: float, depth: int = 0) -> Any:
    """A value satisfying any other (simple) JSON schema, with numbers set from `score`."""
    if depth > 8:
        return None
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        props = schema.get("properties") or {}
        return {name: _instance(sub, score, depth + 1) for name, sub in props.items()}
    if kind == "array":
        item = schema.get("items") or {}
        count = int(schema.get("minItems", 1))
        return [_instance(item, (score + 3.7 * i) % 10.0, depth + 1) for i in range(count)]
    if kind in ("integer", "number"):
        return round(score) if kind == "integer" else round(score, 1)
    if kind == "string":
        return "A deterministic answer from the fake server."
    return False if kind == "boolean" else None


def _answer_object(parsed: _Parsed, score: float) -> Any:
    form, labels = _answer_form(parsed)
    props = (parsed.schema or {}).get("properties") or {}
    if form == "score" and parsed.schema and "score" not in props:
        return _instance(parsed.schema, score)
    if form == "scores":
        return {"scores": {label: _clip_score(parsed, i) for i, label in enumerate(labels)}}
    if form == "ranking":
        order = sorted(range(len(labels)), key=lambda i: -_clip_score(parsed, i))
        return {"ranking": [labels[i] for i in order]}
    if form == "rubric":
        a, b, c = (round((score + shift) % 10.1, 1) for shift in (2.3, 0.0, 4.1))
        return {"A": a, "B": b, "C": c, "vocals": score < 1.0}
    if form == "summary":
        words = [
            "a",
            "calm",
            "everyday",
            "chat",
            "between",
            "two",
            "friends;",
            "mood:",
            "warm,",
            "relaxed,",
            "curious;",
            "keywords:",
            "plans,",
            "weekend,",
            "coffee;",
            "suggested",
            "music:",
            "soft",
            "acoustic",
            "guitar,",
            "slow",
            "tempo,",
            "low",
            "energy",
        ]
        return {"summary": " ".join(words)}
    return {"score": score}


def _asks_for_reasoning(parsed: _Parsed) -> bool:
    return parsed.schema is None and "on the last line" in parsed.user_text


def answer_text(mode: str, parsed: _Parsed) -> str:
    score = deterministic_score(parsed)
    body = json.dumps(_answer_object(parsed, score))
    if _asks_for_reasoning(parsed) and mode == "score":
        return (
            "1. The conversation moves from uncertainty to relief.\n"
            "2. The clip is steady and unobtrusive.\n"
            f"3. The fit is reasonable.\n{body}"
        )
    if mode == "malformed":
        return body[: max(1, len(body) - 3)]
    if mode == "out_of_range":
        return json.dumps({"score": round(10.5 + score, 1)})
    if mode == "fenced":
        return f"```json\n{body}\n```"
    if mode == "prose":
        return f"Here is my assessment of the clip: {body}"
    if mode == "wrong_keys":
        return json.dumps({"rating": score})
    return body


def _usage(api: str, parsed: _Parsed, seconds: float, text: str) -> tuple[int, int, int]:
    text_tokens = math.ceil((len(parsed.system) + len(parsed.user_text)) / 4)
    audio_tokens = math.ceil(seconds * AUDIO_TOKENS_PER_SECOND[api])
    return text_tokens, audio_tokens, max(1, math.ceil(len(text) / 4))


def _gemini_body(mode: str, parsed: _Parsed, seconds: float) -> tuple[dict[str, Any], str | None]:
    text = "" if mode in ("blocked", "empty") else answer_text(mode, parsed)
    text_in, audio_in, out = _usage("gemini", parsed, seconds, text)
    usage: dict[str, Any] = {
        "promptTokenCount": text_in + audio_in,
        "totalTokenCount": text_in + audio_in,
        "promptTokensDetails": [
            {"modality": "TEXT", "tokenCount": text_in},
            *([{"modality": "AUDIO", "tokenCount": audio_in}] if audio_in else []),
        ],
    }
    response: dict[str, Any] = {"usageMetadata": usage, "modelVersion": parsed.model}
    if mode == "blocked":
        response["promptFeedback"] = {"blockReason": "SAFETY"}
        return response, None
    usage["candidatesTokenCount"] = out
    usage["totalTokenCount"] += out
    content: dict[str, Any] = {"role": "model"}
    if mode != "empty":
        content["parts"] = [{"text": text}]
    finish = "MAX_TOKENS" if mode == "empty" else "STOP"
    response["candidates"] = [{"content": content, "finishReason": finish, "index": 0}]
    response["responseId"] = _digest(text, parsed.model).hex()[:16]
    return response, text or None


def _openai_body(mode: str, parsed: _Parsed, seconds: float) -> tuple[dict[str, Any], str | None]:
    text = "" if mode in ("blocked", "empty") else answer_text(mode, parsed)
    text_in, audio_in, out = _usage("openai", parsed, seconds, text)
    finish = {"blocked": "content_filter", "empty": "length"}.get(mode, "stop")
    message = {
        "role": "assistant",
        "content": None if mode == "blocked" else text,
        "refusal": None,
    }
    return {
        "id": "chatcmpl-fake-" + _digest(text, parsed.model).hex()[:12],
        "object": "chat.completion",
        "created": int(time.time()),
        "model": parsed.model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {
            "prompt_tokens": text_in + audio_in,
            "completion_tokens": out,
            "total_tokens": text_in + audio_in + out,
            "prompt_tokens_details": {"audio_tokens": audio_in, "cached_tokens": 0},
        },
    }, text or None


def _error_response(api: str, reply: _Reply) -> web.Response:
    if api == "gemini":
        status_name = _GEMINI_STATUS.get(reply.status, "UNKNOWN")
        error: dict[str, Any] = {
            "code": reply.status,
            "message": reply.message,
            "status": status_name,
        }
        if reply.retry_after is not None:
            error["details"] = [
                {
                    "@type": "type.googleapis.com/google.rpc.RetryInfo",
                    "retryDelay": f"{reply.retry_after:g}s",
                }
            ]
        payload: dict[str, Any] = {"error": error}
    else:
        payload = {
            "error": {
                "message": reply.message,
                "type": _OPENAI_TYPE.get(reply.status, "server_error"),
                "param": None,
                "code": None,
            }
        }
    headers = {}
    if reply.retry_after is not None:
        headers["Retry-After"] = f"{reply.retry_after:g}"
    return web.json_response(payload, status=reply.status, headers=headers)


# ------------------------------------------------------------------ the application
def _chosen_fault(settings: FakeSettings, body_sha: str, arrival: int) -> str | None:
    if not settings.faults:
        return None
    digest = _digest(str(settings.seed), body_sha, str(arrival))
    if arrival > settings.fail_first:
        draw = int.from_bytes(digest[:4], "big") / 2**32
        if draw >= settings.fault_rate:
            return None
    return settings.faults[digest[4] % len(settings.faults)]


def build_app(state: FakeState) -> web.Application:
    async def chat(request: web.Request) -> web.StreamResponse:
        path = request.path
        match = _GEMINI_PATH.match(path)
        if match:
            api = "gemini"
            if match["method"] != "generateContent":
                raise web.HTTPNotFound(text=f"method {match['method']} is not faked")
        elif path.endswith("/chat/completions"):
            api = "openai"
        else:
            raise web.HTTPNotFound(text=f"no fake endpoint at {path}")
        raw = await request.read()
        headers, key = _redacted_headers(request)
        body_sha = hashlib.sha256(path.encode() + b"\0" + raw).hexdigest()
        entry = RequestLog(
            api=api,
            path=path,
            model=match["model"] if match else "",
            body_sha256=body_sha,
            arrival=state.arrive(body_sha),
            headers=headers,
            key_present=bool(key),
        )
        try:
            return await _handle(request, state, api, raw, key, entry)
        except _Reply as reply:
            entry.status = reply.status
            if entry.outcome == "answered":
                entry.outcome = f"error:{reply.status}"
            return _error_response(api, reply)
        finally:
            log.debug(
                "%s %s model=%s arrival=%d -> %d %s",
                api,
                path,
                entry.model,
                entry.arrival,
                entry.status,
                entry.outcome,
            )
            state.record(entry)

    async def stats(_: web.Request) -> web.Response:
        return web.json_response(state.stats())

    async def requests(request: web.Request) -> web.Response:
        limit = int(request.query.get("limit", "1000"))
        entries = state.requests()[-limit:]
        return web.json_response([dataclasses.asdict(e) for e in entries])

    async def reset(_: web.Request) -> web.Response:
        state.reset()
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
    app.router.add_post("/{tail:.*}", chat)
    return app


async def _handle(
    request: web.Request,
    state: FakeState,
    api: str,
    raw: bytes,
    key: str | None,
    entry: RequestLog,
) -> web.StreamResponse:
    settings = state.settings
    if settings.latency_s:
        await asyncio.sleep(settings.latency_s)
    if settings.api_key is not None and key != settings.api_key:
        entry.outcome = "bad_key"
        raise _Reply(401, "API key not valid. Please pass a valid API key.")
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise _Reply(400, "the request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise _Reply(400, "the request body must be a JSON object")
    parsed = _parse_gemini(entry.model, body) if api == "gemini" else _parse_openai(body)
    entry.model = parsed.model
    entry.system, entry.user_text = parsed.system, parsed.user_text
    entry.audio_parts = len(parsed.audio)
    entry.audio_formats = [fmt for _, fmt in parsed.audio]
    entry.json_mode, entry.response_schema = parsed.json_mode, parsed.schema
    entry.temperature = parsed.temperature
    entry.fields = sorted(body)

    forced = _ERROR_MODEL.search(parsed.model)
    if forced:
        status = int(forced.group(1))
        entry.outcome = f"model:{status}"
        retry_after = settings.retry_after_s if status in (429, 503) else None
        if status == 404:
            raise _Reply(404, f"models/{parsed.model} is not found or not supported")
        raise _Reply(status, f"the fake server always answers {status} for this model", retry_after)

    wait = state.admit(time.monotonic())
    if wait is not None:
        entry.outcome = "rpm"
        raise _Reply(429, "requests-per-minute limit reached", math.ceil(wait * 100) / 100)

    fault = _chosen_fault(settings, entry.body_sha256, entry.arrival)
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
        elif fault == "429":
            raise _Reply(429, "Resource has been exhausted (fake).", settings.retry_after_s)
        else:
            status = int(fault)
            retry_after = settings.retry_after_s if status == 503 else None
            raise _Reply(status, f"fake transient server error {status}", retry_after)

    try:
        seconds, entry.audio_sample_rates = _audio_info(parsed.audio)
    except _Reply:
        entry.audio_decodable = False
        raise
    entry.audio_seconds = round(seconds, 3)
    mode_match = _ANSWER_MODEL.search(parsed.model)
    mode = mode_match.group(1) if mode_match else settings.answer
    if mode not in ANSWER_MODES:
        raise _Reply(404, f"models/{parsed.model}: unknown answer mode {mode!r}")
    builder = _gemini_body if api == "gemini" else _openai_body
    payload, entry.answer = builder(mode, parsed, seconds)
    if entry.outcome == "answered":
        entry.outcome = f"answered:{mode}"
    return web.json_response(payload)


# ------------------------------------------------------------------ running it
class FakeServer:
    """The fake API on 127.0.0.1 in a background thread; a context manager for tests."""

    def __init__(
        self, settings: FakeSettings | None = None, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.state = FakeState(settings or FakeSettings())
        self.host, self.port = host, port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def gemini_base_url(self) -> str:
        return self.url

    @property
    def openai_base_url(self) -> str:
        return self.url + "/v1"

    @property
    def settings(self) -> FakeSettings:
        return self.state.settings

    def configure(self, **changes: Any) -> None:
        self.state.settings = dataclasses.replace(self.state.settings, **changes)

    def stats(self) -> dict[str, Any]:
        return self.state.stats()

    def requests(self) -> list[RequestLog]:
        return self.state.requests()

    def reset(self) -> None:
        self.state.reset()

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
            loop.run_until_complete(self._cleanup())
            loop.close()

        self._thread = threading.Thread(target=serve, name="fake-api-server", daemon=True)
        self._thread.start()
        started.wait()
        if failure:
            raise failure[0]
        return self

    async def _start_site(self) -> None:
        self._runner = web.AppRunner(
            build_app(self.state),
            access_log=None,
            handler_cancellation=True,
            shutdown_timeout=0.5,
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        if self.port == 0:
            self.port = int(self._runner.addresses[0][1])

    async def _cleanup(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        self._loop = self._thread = None

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, FakeSettings]:
    parser = argparse.ArgumentParser(
        prog="python -m harness.fake_server",
        description="Local fake of the Gemini and OpenAI chat APIs (deterministic scores, faults).",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--fault-rate", type=float, default=0.0, help="share of requests faulted")
    parser.add_argument(
        "--faults",
        default=",".join(FAULT_KINDS),
        help=f"comma-separated mix of transient faults ({','.join(FAULT_KINDS)})",
    )
    parser.add_argument(
        "--fail-first", type=int, default=0, help="fault the first N arrivals of every body"
    )
    parser.add_argument("--retry-after", type=float, default=1.0, help="Retry-After of a 429")
    parser.add_argument("--slow", type=float, default=30.0, help="stall of a 'timeout' fault")
    parser.add_argument("--rpm", type=float, default=None, help="requests-per-minute limit")
    parser.add_argument("--answer", default="score", choices=ANSWER_MODES)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verbose", action="store_true", help="log every request")
    args = parser.parse_args(argv)
    settings = FakeSettings(
        latency_s=args.latency,
        fault_rate=args.fault_rate,
        faults=tuple(f for f in args.faults.split(",") if f),
        fail_first=args.fail_first,
        retry_after_s=args.retry_after,
        slow_s=args.slow,
        rpm=args.rpm,
        answer=args.answer,
        seed=args.seed,
    )
    return args, settings


async def serve_forever(settings: FakeSettings, host: str, port: int) -> None:
    runner = web.AppRunner(
        build_app(FakeState(settings)), access_log=None, handler_cancellation=True
    )
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    print(f"fake API server on http://{host}:{port}", flush=True)
    print(f"  GEMINI_BASE_URL=http://{host}:{port}", flush=True)
    print(f"  OPENAI_BASE_URL=http://{host}:{port}/v1", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def main(argv: list[str] | None = None) -> None:
    try:
        args, settings = _parse_args(argv)
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve_forever(settings, args.host, args.port))


if __name__ == "__main__":
    main()
