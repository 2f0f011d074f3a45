"""A local stand-in for the Gemini and OpenAI chat APIs, for tests and offline smoke checks:
`POST /{version}/models/{model}:generateContent`, `POST [/prefix]/v1/chat/completions` and both
batch APIs, answered closely enough for the real SDKs with a deterministic score derived from
the request (prompt text and audio bytes), with faults on demand (transient errors, malformed
HTTP 200 answers, answer modes, latency, an rpm limit, `max_concurrency`). Every request is
recorded and counted (`GET /_stats`, `GET /_requests`; `POST /_settings`, `POST /_reset`).
Options and faults: docs/fake_api.md.

In-process (tests): `with FakeServer(FakeSettings(fail_first=1)) as server: ...` runs it on
a free port in a background thread. As a process: `python -m harness.fake_api --port 8765`.
"""

from harness.fake_api.answers import answer_text, deterministic_score
from harness.fake_api.server import FakeServer, main, parse_args
from harness.fake_api.state import (
    ANSWER_MODES,
    FAULT_KINDS,
    MALFORMED_KINDS,
    FakeSettings,
    RequestLog,
)

__all__ = [
    "ANSWER_MODES",
    "FAULT_KINDS",
    "MALFORMED_KINDS",
    "FakeServer",
    "FakeSettings",
    "RequestLog",
    "answer_text",
    "deterministic_score",
    "main",
    "parse_args",
]
