"""The OpenAI side of the fake API (`POST [/prefix]/v1/chat/completions`, also vLLM's)."""

from __future__ import annotations

import time
from typing import Any

from harness.fake_api.answers import answer_text, digest, token_usage
from harness.fake_api.logprobs import openai_logprobs
from harness.fake_api.state import ParsedRequest, Reply

OPENAI_TYPE = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
}


def parse_openai(body: dict[str, Any]) -> ParsedRequest:
    model = body.get("model")
    messages = body.get("messages")
    if not isinstance(model, str) or not isinstance(messages, list):
        raise Reply(400, "'model' and 'messages' are required")
    system: list[str] = []
    texts: list[str] = []
    audio: list[tuple[str, str]] = []
    roles: list[str] = []
    for message in messages:
        if message.get("role") not in ("system", "developer"):
            roles.append(str(message.get("role")))
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
                    raise Reply(400, "audio_url must be a base64 data URL in this fake server")
                audio.append((data, header[5:].removesuffix(";base64")))
                texts.append("<audio>")
            else:
                raise Reply(400, f"unsupported content part type {kind!r}")
    response_format = body.get("response_format") or {}
    kind = response_format.get("type")
    schema = json_mode = None
    if kind == "json_schema":
        json_mode = "schema"
        schema = (response_format.get("json_schema") or {}).get("schema")
    elif kind == "json_object":
        json_mode = "object"
    top = int(body.get("top_logprobs") or 0) if body.get("logprobs") else None
    instructions, user, temperature = "".join(system), "".join(texts), body.get("temperature")
    return ParsedRequest(
        model, instructions, user, audio, json_mode, schema, temperature, roles, top
    )


def openai_body(
    mode: str, parsed: ParsedRequest, seconds: float, cached: int = 0
) -> tuple[dict[str, Any], str | None]:
    text = "" if mode in ("blocked", "empty") else answer_text(mode, parsed)
    text_in, audio_in, out = token_usage("openai", parsed, seconds, text)
    logprobs = None
    if parsed.logprobs is not None and text:
        logprobs = openai_logprobs(text, parsed.logprobs)
    finish = {"blocked": "content_filter", "empty": "length"}.get(mode, "stop")
    message = {
        "role": "assistant",
        "content": None if mode == "blocked" else text,
        "refusal": None,
    }
    return {
        "id": "chatcmpl-fake-" + digest(text, parsed.model).hex()[:12],
        "object": "chat.completion",
        "created": int(time.time()),
        "model": parsed.model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": finish, "logprobs": logprobs}
        ],
        "usage": {
            "prompt_tokens": text_in + audio_in,
            "completion_tokens": out,
            "total_tokens": text_in + audio_in + out,
            "prompt_tokens_details": {"audio_tokens": audio_in, "cached_tokens": cached},
        },
    }, text or None


def openai_error(reply: Reply) -> dict[str, Any]:
    return {
        "error": {
            "message": reply.message,
            "type": OPENAI_TYPE.get(reply.status, "server_error"),
            "param": None,
            "code": None,
        }
    }
