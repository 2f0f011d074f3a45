"""What a run counted: calls, answers from the cache, model calls, retries, failures by kind."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from harness.core.secrets import scrub
from harness.core.types import ProviderError


@dataclass
class RunStats:
    """What a run counted (run.json `stats`)."""

    calls: int = 0
    cache_hits: int = 0
    model_calls: int = 0
    retries: int = 0
    errors: int = 0
    parse_failures: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    wall_s: float = 0.0
    shared_answers: int = 0  # answers another process was already fetching (claims)
    resumed_records: int = 0  # complete records an interrupted run of this experiment left
    torn_lines: int = 0  # half-written lines it left (a kill mid-write)
    cache_repaired: int = 0  # damaged cache entries found, so asked again
    seeded: int = 0  # answers a seed cache gave (copied into the run's cache); shown if any
    error_kinds: Counter[str] = field(default_factory=Counter)
    first_errors: dict[str, str] = field(default_factory=dict)  # kind -> first message
    batch: dict[str, int] | None = None  # batch mode's counts (`harness.calls.batch_jobs`)

    def failed(self, exc: ProviderError) -> str:
        """Count a failed call by kind; the text its record carries (`kind: message`)."""
        message = scrub(str(exc))
        self.error_kinds[exc.kind] += 1
        self.first_errors.setdefault(exc.kind, message)
        return f"{exc.kind}: {message}"

    def to_json(self) -> dict[str, Any]:
        left_out = {"error_kinds"} | ({"batch"} if self.batch is None else set())
        left_out |= {"seeded"} if not self.seeded else set()
        return {
            **{k: v for k, v in self.__dict__.items() if k not in left_out},
            "error_kinds": dict(self.error_kinds),
        }
