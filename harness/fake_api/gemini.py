"""The Gemini side of the fake API: `POST /{version}/models/{model}:generateContent`
requests read into a ParsedRequest, and answers and errors in Gemini's wire format."""

from __future__ import annotations

import re
from typing import Any

from harness.fake_api.answers import answer_text, digest, token_usage
from harness.fake_api.logprobs import gemini_logprobs
from harness.fake_api.state import ParsedRequest, Reply

GEMINI_PATH = re.compile(
    r"^(?:/.*)?/(?P<version>[^/]+)/models/(?P<model>[^/:]+):(?P<method>[A-Za-z]+)$"
)


GEMINI_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


def parse_gemini(model: str, body: dict[str, Any]) -> ParsedRequest:
    system_parts = (body.get("systemInstruction") or {}).get("parts") or []
    system = "".join(p.get("text", "") for p in system_parts)
    texts: list[str] = []
    audio: list[tuple[str, str]] = []
    roles: list[str] = []
    for content in body.get("contents") or []:
        roles.append("assistant" if content.get("role") == "model" else "user")
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
    top = int(config.get("logprobs") or 0) if config.get("responseLogprobs") else None
    user, temperature = "".join(texts), config.get("temperature")
    return ParsedRequest(model, system, user, audio, json_mode, schema, temperature, roles, top)


def gemini_body(
    mode: str, parsed: ParsedRequest, seconds: float, cached: int = 0
) -> tuple[dict[str, Any], str | None]:
    text = "" if mode in ("blocked", "empty") else answer_text(mode, parsed)
    text_in, audio_in, out = token_usage("gemini", parsed, seconds, text)
    usage: dict[str, Any] = {
        "promptTokenCount": text_in + audio_in,
        "totalTokenCount": text_in + audio_in,
        "promptTokensDetails": [
            {"modality": "TEXT", "tokenCount": text_in},
            *([{"modality": "AUDIO", "tokenCount": audio_in}] if audio_in else []),
        ],
    }
    if cached:
        usage["cachedContentTokenCount"] = cached
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
    candidate: dict[str, Any] = {"content": content, "finishReason": finish, "index": 0}
    if parsed.logprobs is not None and text:
        result = gemini_logprobs(text, parsed.logprobs)
        candidate["logprobsResult"] = result
        candidate["avgLogprobs"] = result["logProbabilitySum"] / len(result["chosenCandidates"])
    response["candidates"] = [candidate]
    response["responseId"] = digest(text, parsed.model).hex()[:16]
    return response, text or None


def gemini_error(reply: Reply) -> dict[str, Any]:
    status = GEMINI_STATUS.get(reply.status, "UNKNOWN")
    error: dict[str, Any] = {"code": reply.status, "message": reply.message, "status": status}
    rpc, details = "type.googleapis.com/google.rpc.", []
    if reply.retry_after is not None:
        details.append({"@type": rpc + "RetryInfo", "retryDelay": f"{reply.retry_after:g}s"})
    if reply.reason is not None:
        info = {"reason": reply.reason, "domain": "googleapis.com"}
        details.append({"@type": rpc + "ErrorInfo", **info})
    if details:
        error["details"] = details
    return {"error": error}
