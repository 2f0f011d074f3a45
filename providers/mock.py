"""A scripted judge for offline tests. `answers` maps a clip id (or "*") to a score, a raw string,
or "!transient"/"!permanent"/"!crash"; a list is consumed one entry per call. Unscripted, it
answers a score derived from the prompt."""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
from typing import Any

from pydantic import Field

from harness.core.types import ChatRequest, ChatResponse, ProviderConfig, ProviderError
from providers.base import Judge


class MockOptions(ProviderConfig):
    answers: dict[str, Any] = Field(default_factory=dict, description="clip id or '*' -> script")
    delay_s: float = Field(default=0.0, ge=0.0, description="seconds before each answer")


class MockJudge(Judge):
    default_model = "mock-1"
    Options = MockOptions
    config: MockOptions

    def __init__(self, config: ProviderConfig) -> None:
        super().__init__(config)
        self.answers: dict[str, Any] = copy.deepcopy(self.config.answers)
        self.calls: list[ChatRequest] = []

    async def generate(self, request: ChatRequest) -> ChatResponse:
        self.calls.append(request)
        if self.config.delay_s:
            await asyncio.sleep(self.config.delay_s)
        clip_ids = [a.clip_id for a in request.audio] or ["*"]
        script = next(
            (self.answers[c] for c in clip_ids if c in self.answers), self.answers.get("*")
        )
        if isinstance(script, list):
            script = script.pop(0) if len(script) > 1 else script[0]
        if script == "!transient":
            raise ProviderError(
                "mock transient failure", transient=True, kind="server_error", retry_after=0.0
            )
        if script == "!crash":
            raise RuntimeError("mock crash")
        if script == "!permanent":
            raise ProviderError("mock permanent failure", transient=False, kind="bad_request")
        if isinstance(script, str):
            text = script
        elif isinstance(script, int | float):
            text = json.dumps({"score": script})
        else:
            digest = hashlib.sha256((request.system + request.user_text).encode()).digest()
            sha = "".join(a.sha256 for a in request.audio).encode()
            digest = hashlib.sha256(digest + sha).digest()
            text = json.dumps({"score": round(digest[0] / 25.5, 1)})
        return ChatResponse(text=text, input_tokens=len(request.user_text) // 4, output_tokens=8)
