"""The smallest chat.completion answer, for tests that answer an OpenAI client without the
fake server (a mock transport, a compressed body, a batch output line)."""

from __future__ import annotations

from typing import Any


def chat_completion(
    text: str, *, prompt_tokens: int = 3, completion_tokens: int = 2
) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": text},
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
