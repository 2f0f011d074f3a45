"""What the fake model answers: a deterministic score from the request, in the form the prompt
or its schema asks for, and the usage the real services would bill."""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import json
import math
import re
from typing import Any

import soundfile

from harness.fake_api.state import ParsedRequest, Reply

AUDIO_TOKENS_PER_SECOND = {"gemini": 32, "openai": 10}
SUMMARY = (
    "a calm everyday chat between two friends; mood: warm, relaxed, curious; keywords: plans, "
    "weekend, coffee; suggested music: soft acoustic guitar, slow tempo, low energy"
)
BIG = 5000  # digits of a huge number, depth of deep nesting: past Python's limits (4,300; 1,000)


def audio_info(audio: list[tuple[str, str]]) -> tuple[float, list[int]]:
    """Total duration and each part's sample rate; Reply(400) for a part that does not
    decode as audio."""
    total, rates = 0.0, []
    for index, (data, _) in enumerate(audio):
        try:
            # Like the real services (proto3 JSON), standard or URL-safe base64 is accepted.
            standard = data.replace("-", "+").replace("_", "/")
            raw = base64.b64decode(standard + "=" * (-len(standard) % 4), validate=True)
            info = soundfile.info(io.BytesIO(raw))
        except (binascii.Error, ValueError, RuntimeError, soundfile.LibsndfileError) as exc:
            raise Reply(400, f"audio part {index} could not be decoded: {exc}") from None
        total += info.frames / info.samplerate
        rates.append(int(info.samplerate))
    return total, rates


def digest(*pieces: str | bytes) -> bytes:
    hasher = hashlib.sha256()
    for piece in pieces:
        hasher.update(piece.encode("utf-8", "surrogatepass") if isinstance(piece, str) else piece)
        hasher.update(b"\0")
    return hasher.digest()


def deterministic_score(parsed: ParsedRequest) -> float:
    """A score in [0, 10] that depends on the model, the prompt text and the audio bytes."""
    hashed = digest(parsed.model, parsed.system, parsed.user_text, *(a for a, _ in parsed.audio))
    return int.from_bytes(hashed[:4], "big") % 101 / 10


def clip_score(parsed: ParsedRequest, index: int, label: str | None = None) -> float:
    """A per-clip score for joint prompts, so that the same clip gets similar standing
    whatever its position: from the text after its label (`Clip 7: a song title`), else
    from its own audio when it was sent, else from its label index."""
    piece: str | bytes = str(index)
    shown = re.search(rf"^{re.escape(label)}: (.+)$", parsed.user_text, re.M) if label else None
    if shown and "<audio>" not in shown.group(1):
        piece = shown.group(1)
    elif index < len(parsed.audio):
        piece = parsed.audio[index][0]
    hashed = digest(parsed.model, parsed.system, piece)
    return int.from_bytes(hashed[:4], "big") % 101 / 10


def answer_form(parsed: ParsedRequest) -> tuple[str, list[str]]:
    """What the prompt asks for ("score", "scores", "ranking", "rubric", "summary",
    "description", "feedback") and the clip labels of a joint prompt, read from the JSON
    schema or else from the prompt text."""
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
    for form in ("description", "feedback"):  # prompt describe; the user simulator
        if form in props or f'{{"{form}":' in text:
            return form, []
    if '{"scores":' in text:
        return "scores", re.findall(r'"([^"{}]+)": <score>', text)
    if '{"ranking":' in text:
        found = re.search(r"using each label \(([^)]*)\)", text)
        return "ranking", [label.strip() for label in found.group(1).split(",")] if found else []
    return "score", []


def schema_instance(schema: dict[str, Any], score: float, depth: int = 0) -> Any:
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
        return {name: schema_instance(sub, score, depth + 1) for name, sub in props.items()}
    if kind == "array":
        item = schema.get("items") or {}
        count = int(schema.get("minItems", 1))
        return [schema_instance(item, (score + 3.7 * i) % 10.0, depth + 1) for i in range(count)]
    if kind in ("integer", "number"):
        low, high = schema.get("minimum", 0), schema.get("maximum", 10)
        value = low + score / 10 * (high - low)  # the score's place in the asked range
        return round(value) if kind == "integer" else round(value, 1)
    if kind == "string":
        return "A deterministic answer from the fake server."
    return False if kind == "boolean" else None


def answer_object(parsed: ParsedRequest, score: float) -> Any:
    form, labels = answer_form(parsed)
    props = (parsed.schema or {}).get("properties") or {}
    if form == "score" and parsed.schema and "score" not in props:
        return schema_instance(parsed.schema, score)
    if form == "scores":
        return {"scores": {label: clip_score(parsed, i) for i, label in enumerate(labels)}}
    if form == "ranking":
        order = sorted(range(len(labels)), key=lambda i: -clip_score(parsed, i, labels[i]))
        return {"ranking": [labels[i] for i in order]}
    if form == "rubric":
        a, b, c = (round((score + shift) % 10.1, 1) for shift in (2.3, 0.0, 4.1))
        return {"A": a, "B": b, "C": c, "vocals": score < 1.0}
    if form == "summary":
        return {"summary": SUMMARY}
    if form in ("description", "feedback"):
        return {form: free_text(form, parsed)}
    return {"score": score}


WORDS = {
    "tempo": ["slow", "mid-tempo", "upbeat", "fast", "gentle"],
    "genre": ["piano piece", "acoustic folk song", "ambient track", "jazz tune", "string piece"],
    "instrument": ["soft strings", "acoustic guitar", "mellow piano", "light drums", "synth pads"],
    "mood": ["calm", "warm", "melancholic", "cheerful", "dreamy"],
}


def free_text(form: str, parsed: ParsedRequest) -> str:
    """A short deterministic music text chosen by a hash of the request: a description
    (prompt `describe`) or a listener's reply (the user simulator)."""
    hashed = digest(parsed.model, parsed.system, parsed.user_text)
    tempo, genre, first, second, mood = (
        WORDS[kind][hashed[i] % len(WORDS[kind])]
        for i, kind in enumerate(("tempo", "genre", "instrument", "instrument", "mood"))
    )
    if form == "feedback":
        return f"Not quite. I would like something more {mood}, with {first}."
    return f"A {tempo} {mood} {genre} with {first} and {second}, quiet and steady."


def asks_for_reasoning(parsed: ParsedRequest) -> bool:
    return parsed.schema is None and "on the last line" in parsed.user_text


PARTIAL_RANKING_LENGTH = 10


def answer_text(mode: str, parsed: ParsedRequest) -> str:
    score = deterministic_score(parsed)
    answer = answer_object(parsed, score)
    if mode == "partial_ranking" and isinstance(answer, dict) and "ranking" in answer:
        # A pool-sized ranking cut short, with one unknown and one repeated label.
        ranked = answer["ranking"][:PARTIAL_RANKING_LENGTH]
        answer = {"ranking": [*ranked, "Clip 0", ranked[0]]}
    body = json.dumps(answer)
    if asks_for_reasoning(parsed) and mode == "score":
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
    if mode == "huge_number":
        return '{"score": ' + "9" * BIG + "}"
    if mode == "lone_surrogate":  # sent as the JSON escape "\\ud800": no UTF-8 once decoded
        return "\ud800 " + body[: max(1, len(body) - 3)] + " \udfff"
    if mode == "deep_nesting":
        return '{"score": ' + "[" * BIG + "]" * BIG + "}"
    return body


def token_usage(api: str, parsed: ParsedRequest, seconds: float, text: str) -> tuple[int, int, int]:
    text_tokens = math.ceil((len(parsed.system) + len(parsed.user_text)) / 4)
    audio_tokens = math.ceil(seconds * AUDIO_TOKENS_PER_SECOND[api])
    return text_tokens, audio_tokens, max(1, math.ceil(len(text) / 4))
