"""A local fake of the Gemini and OpenAI chat and batch APIs for tests and offline demos:
deterministic answers, faults on demand, every request logged (docs/fake_api.md).

In-process: `with FakeServer(FakeSettings(fail_first=1)) as server: ...`; as a process:
`python -m harness.fake_api --port 8765`.
"""

from harness.fake_api.server import FakeServer, main, parse_args
from harness.fake_api.state import ANSWER_MODES, FAULT_KINDS, MALFORMED_KINDS, FakeSettings

__all__ = [
    "ANSWER_MODES",
    "FAULT_KINDS",
    "MALFORMED_KINDS",
    "FakeServer",
    "FakeSettings",
    "main",
    "parse_args",
]
