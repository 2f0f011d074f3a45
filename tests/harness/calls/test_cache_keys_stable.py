"""Cache keys do not move: every registered provider, with its defaults and with each of its
options changed one at a time, keys a fixed chat or score request exactly as the code of
2026-11-28 (before the package redesign) did. A key that moved would make every cached answer
of its experiments a miss and pay for it again; `cache_keys.json` was written by that code
(`python tests/harness/calls/test_cache_keys_stable.py --write` rewrites it, on purpose only)."""

from __future__ import annotations

import json
import sys
import typing
from pathlib import Path
from typing import Any

import pytest

from harness.calls.cache import request_key
from harness.core.types import AudioRef, ChatRequest, ScoreCandidate, ScoreRequest
from providers import REGISTRY, create_provider, provider_options

GOLDEN = Path(__file__).with_name("cache_keys.json")
BASE_URLS = ["http://127.0.0.1:9/v1", "http://127.0.0.1:10/v1"]
REQUIRED: dict[str, dict[str, Any]] = {
    "jury": {"members": [{"name": "mock"}, {"name": "mock", "seed": 1}]},
    "mock": {"answers": {"default": '{"score": 5}'}},
    "openai-compatible": {"base_url": BASE_URLS[0], "model": "Qwen/Qwen2.5-Omni-7B"},
    "simulated": {"dataset": "data/sample"},
}
CHAT = ChatRequest(
    system="You rate music.",
    parts=("Dialogue: hi\nClip: ", AudioRef("c1", Path("c1.wav"), "ab" * 32), "\nScore it."),
    response_schema={"type": "object", "properties": {"score": {"type": "number"}}},
)
SCORE = ScoreRequest(
    query="a quiet evening",
    candidates=(ScoreCandidate("c1", "soft piano", None), ScoreCandidate("c2", "loud drums", None)),
    music="caption",
    item_id="d1",
    repeat=0,
)


def _variants(annotation: Any, default: Any) -> list[Any]:
    """Values other than `default` that a field of this type may take, in order of trial."""
    text = str(annotation)
    if typing.get_origin(annotation) is typing.Literal:
        return [v for v in typing.get_args(annotation) if v != default]
    found = []
    for arg in typing.get_args(annotation) or (annotation,):
        if typing.get_origin(arg) is typing.Literal:
            found += [v for v in typing.get_args(arg) if v != default]
    if found:
        return found
    if annotation is bool:
        return [not default]
    if "dict" in text:
        return [{"input": 1.0, "output": 2.0}, {"a": 1}]
    if "list" in text:
        return [BASE_URLS, "http://127.0.0.1:11/v1"]
    if annotation is int or ("int" in text and "float" not in text):
        return [3 if default in (None, 0) else default + 1]
    if annotation is float or "float" in text:
        return [0.5 if default in (None, 0) else default * 0.5]
    return ["some/model-b", "http://127.0.0.1:11/v1", "x"]


def keys() -> dict[str, str]:
    out: dict[str, str] = {}
    for name in sorted(REGISTRY):
        entry = REGISTRY[name]
        options = entry.load(name).Options
        request = CHAT if entry.kind == "judge" else SCORE
        base = {"name": name, **REQUIRED.get(name, {})}
        cases: list[tuple[str, dict[str, Any]]] = [("defaults", base)]
        for field, info in options.model_fields.items():
            if field in ("name", "api_key_env"):
                continue
            for value in _variants(info.annotation, info.default):
                case = {**base, field: value}
                try:
                    create_provider(provider_options(case))
                except Exception:
                    continue
                cases.append((f"{field}={json.dumps(value, sort_keys=True)}", case))
                break
        for label, case in cases:
            provider = create_provider(provider_options(case))
            identity = provider.identity()
            out[f"{name} {label}"] = request_key(identity, request, template="t0", repeat=0)
            if entry.kind == "judge" and label == "defaults":
                summary = request_key(identity, request, audio=False, purpose="summary")
                out[f"{name} {label} summary"] = summary
                asked = request.with_follow_up("not json", "Answer with JSON only.")
                out[f"{name} {label} reask"] = request_key(identity, asked, template="t0")
    return out


@pytest.fixture(autouse=True)
def _keys_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OPENAI_API_KEY", "GEMINI_API_KEY", "OPENAI_BASE_URL", "GEMINI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("GEMINI_API_KEY", "test")


def test_every_cache_key_is_the_one_the_pre_redesign_code_made() -> None:
    expected = json.loads(GOLDEN.read_text())
    got = keys()
    moved = sorted(k for k in expected if got.get(k) != expected[k])
    assert not moved, f"{len(moved)} cache keys moved: {moved[:10]}"
    assert len(expected) > 150  # every provider, many options each


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    import os

    os.environ.update(OPENAI_API_KEY="sk-test", GEMINI_API_KEY="test")
    for var in ("OPENAI_BASE_URL", "GEMINI_BASE_URL"):
        os.environ.pop(var, None)
    GOLDEN.write_text(json.dumps(keys(), indent=1, sort_keys=True) + "\n")
