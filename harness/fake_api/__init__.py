"""A local stand-in for the Gemini and OpenAI chat APIs, for tests and offline smoke checks.

It speaks `POST /{version}/models/{model}:generateContent` (Gemini) and
`POST [/prefix]/v1/chat/completions` (OpenAI and OpenAI-compatible servers such as vLLM)
closely enough for the real SDKs, answers a deterministic score derived from the request
(prompt text and audio bytes), and injects faults on demand:

- transient faults (`--faults`): 429 with Retry-After, 500, 503, `timeout` (the answer is
  held back for `--slow` seconds), `drop` (the connection is closed without an answer), and
  malformed HTTP 200 answers (`html`, `html_json`, `not_utf8`, `wrong_shape`, `huge_number`,
  `deep_nesting`; `--faults malformed` for all six);
  either for a share of requests (`--fault-rate`, decided per request body and arrival, so
  a run is reproducible whatever the concurrency) or for the first N arrivals of every
  distinct request body (`--fail-first`);
- answer modes (`--answer`): score, malformed, out_of_range, fenced, prose, wrong_keys,
  blocked, empty, huge_number, deep_nesting (the last two: JSON past the parser's limits);
- a fixed latency, and a requests-per-minute limit answered with 429 + Retry-After;
- at most `max_concurrency` requests handled at once (`--max-concurrency`, a vLLM server's
  `max_num_seqs`): the rest wait for a slot; `max_in_flight` in the stats shows the most;
- model names: one containing `error-<status>` (e.g. `error-404`) is always answered with
  that status, one containing `answer-<mode>` (e.g. `fake-answer-malformed`) with that mode.

It also speaks both batch APIs: OpenAI's `POST /v1/files`, `/v1/batches` (create, retrieve,
list, cancel) with output and error files, and Gemini's `:batchGenerateContent` with
`/{version}/batches/{id}`; jobs stay pending `batch_latency_s`, and `batch_expire_first`,
`batch_error_rate` and `batch_unreadable_rate` expire jobs, give error lines and cut output
lines. With `prefix_cache` it reports cached input tokens (prompt-prefix caching), and it
counts every paid request (answered online or in a job) to show any paid twice.

Every request is recorded (model, arrival count of its body, audio present and decodable,
JSON mode asked for, headers with keys redacted) and counted; `GET /_stats` and
`GET /_requests` expose that, `POST /_settings` changes the settings, `POST /_reset` clears.

In-process (tests): `with FakeServer(FakeSettings(fail_first=1)) as server: ...` runs it on
a free port in a background thread. As a process:
`python -m harness.fake_api --port 8765 --latency 0.2 --fault-rate 0.2 --rpm 600`.
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
