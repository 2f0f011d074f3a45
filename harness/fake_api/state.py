"""The fake API's settings, its log of what arrived, and the counters tests read."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import hashlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

FAULT_KINDS = ("429", "500", "503", "timeout", "drop")
# HTTP 200 answers no SDK can read: an HTML page, HTML labelled as JSON, a body that is not
# UTF-8, JSON of the wrong shape (a list), a number of 5,000 digits, nesting 5,000 deep.
MALFORMED_KINDS = ("html", "html_json", "not_utf8", "wrong_shape", "huge_number", "deep_nesting")
ANSWER_MODES = (
    "score",
    "malformed",
    "out_of_range",
    "fenced",
    "prose",
    "wrong_keys",
    "blocked",
    "empty",
    "partial_ranking",
    "huge_number",
    "deep_nesting",
    "lone_surrogate",
)
KEY_HEADERS = frozenset({"x-goog-api-key", "authorization", "api-key", "x-api-key"})
REDACTED = "[REDACTED]"


def expand_faults(faults: str | tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Fault kinds from a list or a comma-separated string; `malformed` stands for every
    malformed-200 kind."""
    names = faults.split(",") if isinstance(faults, str) else list(faults)
    expanded: list[str] = []
    for name in (n.strip() for n in names):
        expanded += MALFORMED_KINDS if name == "malformed" else [name] if name else []
    known = FAULT_KINDS + MALFORMED_KINDS
    unknown = sorted(set(expanded) - set(known))
    if unknown:
        raise ValueError(f"unknown fault kinds {unknown} (known: {known} or 'malformed')")
    return tuple(expanded)


@dataclass
class FakeSettings:
    latency_s: float = 0.0
    fault_rate: float = 0.0
    faults: tuple[str, ...] = FAULT_KINDS
    fail_first: int = 0
    retry_after_s: float = 1.0
    slow_s: float = 30.0
    # Limits per rpm_window_s as OpenAI keeps them: buckets that start full and refill
    # evenly, each response sending the x-ratelimit-{limit,remaining,reset}-* headers.
    rpm: float | None = None
    tpm: float | None = None  # tokens of the prompts (text and audio)
    rpm_window_s: float = 60.0  # tests shrink the minute to keep the limits fast
    answer: str = "score"
    api_key: str | None = None  # when set, requests with another key get 401
    seed: int = 0
    batch_latency_s: float = 0.0  # how long a batch job stays pending
    batch_expire_first: int = 0  # the first N jobs expire with half their requests answered
    batch_error_rate: float = 0.0  # share of requests given a 500 line (first time only)
    batch_unreadable_rate: float = 0.0  # share given a cut output line (first time only)
    prefix_cache: bool = False  # report prompt-prefix cache hits (cached input tokens)
    # At most this many requests handled at once (a vLLM server's max_num_seqs); the rest
    # wait their turn, their latency counted from when it comes. None: no limit.
    max_concurrency: int | None = None
    model: str | None = None  # answer as this model, whatever is asked (a misconfigured server)

    def __post_init__(self) -> None:
        self.faults = expand_faults(self.faults)
        if self.answer not in ANSWER_MODES:
            raise ValueError(f"unknown answer mode {self.answer!r} (known: {ANSWER_MODES})")
        if not 0.0 <= self.fault_rate <= 1.0:
            raise ValueError("fault_rate must be in [0, 1]")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")

    def public(self) -> dict[str, Any]:
        values = dataclasses.asdict(self)
        values["api_key"] = REDACTED if self.api_key else None
        return values


@dataclass
class RequestLog:
    """What arrived at the server for one request, and what it was answered."""

    api: str  # "gemini" or "openai"
    path: str
    model: str
    body_sha256: str
    arrival: int  # how many times this exact body has arrived, this one included
    headers: dict[str, str]
    key_present: bool
    system: str = ""
    user_text: str = ""
    audio_parts: int = 0
    audio_formats: list[str] = field(default_factory=list)
    audio_decodable: bool = True
    audio_seconds: float = 0.0
    audio_sample_rates: list[int] = field(default_factory=list)
    json_mode: str | None = None  # "schema", "object" or None (JSON asked for in the prompt)
    response_schema: dict[str, Any] | None = None
    temperature: float | None = None
    roles: list[str] = field(default_factory=list)  # the turns after the system text
    logprobs: int | None = None  # top alternatives asked for (None: not asked)
    fields: list[str] = field(default_factory=list)  # top-level keys of the request body
    status: int = 200
    outcome: str = "answered"
    answer: str | None = None
    arrived_s: float = 0.0  # wall clock (time.time()) when it arrived and when it was answered
    done_s: float = 0.0


@dataclass
class ParsedRequest:
    model: str
    system: str
    user_text: str
    audio: list[tuple[str, str]]  # (base64 data, format or mime type)
    json_mode: str | None
    schema: dict[str, Any] | None
    temperature: float | None
    roles: list[str] = field(default_factory=list)  # "user", "assistant" (Gemini's "model")
    logprobs: int | None = None  # alternatives asked for per token; None: no log-probabilities


class Reply(Exception):
    """An error answer, raised from anywhere in request handling."""

    def __init__(
        self,
        status: int,
        message: str,
        retry_after: float | None = None,
        reason: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.retry_after = status, message, retry_after
        self.reason = reason  # Gemini's ErrorInfo reason, e.g. API_KEY_INVALID


# Prompt caching as OpenAI describes it: prompts of 1,024 tokens or more, cached in blocks of
# 128 tokens from the start (Gemini's implicit caching has minimums of 1,024 or 2,048).
CACHE_MIN_TOKENS = 1024
CACHE_BLOCK_TOKENS = 128
CHARS_PER_TOKEN = 4


class FakeState:
    """Settings, request log and counters; shared between the server loop and test threads."""

    def __init__(self, settings: FakeSettings, max_log: int = 20_000) -> None:
        self.settings = settings
        self._prefixes: set[str] = set()
        self._lock = threading.Lock()
        self._arrivals: collections.Counter[str] = collections.Counter()
        self._log: collections.deque[RequestLog] = collections.deque(maxlen=max_log)
        self._counts: collections.Counter[str] = collections.Counter()
        self._buckets: dict[str, tuple[float, float]] = {}  # requests/tokens -> (level, when)
        self.in_flight = 0
        self.max_in_flight = 0  # the most requests handled at once (max_concurrency caps it)

    def arrive(self, body_sha: str) -> int:
        with self._lock:
            self._arrivals[body_sha] += 1
            return self._arrivals[body_sha]

    def cached_tokens(self, parsed: ParsedRequest) -> int:
        """Input tokens a prefix cache would serve for this prompt (0 unless `prefix_cache`):
        the longest run of whole blocks from its start that an earlier prompt shared (a clip
        counts by its bytes, so requests for different clips part at the first clip)."""
        if not self.settings.prefix_cache:
            return 0
        pieces = parsed.user_text.split("<audio>")
        clips = [hashlib.sha256(data.encode()).hexdigest()[:16] for data, _ in parsed.audio]
        user = pieces[0] + "".join(
            f"<audio {clips[i] if i < len(clips) else i}>{piece}"
            for i, piece in enumerate(pieces[1:])
        )
        text = f"{parsed.model}\0{parsed.system}\0{user}"
        tokens = len(text) // CHARS_PER_TOKEN
        if tokens < CACHE_MIN_TOKENS:
            return 0
        cached = 0
        with self._lock:
            for end in range(CACHE_MIN_TOKENS, tokens + 1, CACHE_BLOCK_TOKENS):
                prefix = text[: end * CHARS_PER_TOKEN]
                if prefix in self._prefixes:
                    cached = end
                self._prefixes.add(prefix)
        return cached

    @contextlib.contextmanager
    def handling(self) -> Iterator[None]:
        """Count a request as handled while the block runs (`max_in_flight`)."""
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            yield
        finally:
            with self._lock:
                self.in_flight -= 1

    def _limits(self) -> dict[str, float]:
        given = {"requests": self.settings.rpm, "tokens": self.settings.tpm}
        return {what: limit for what, limit in given.items() if limit}

    def _levels(self, now: float) -> dict[str, float]:
        """Each bucket's level at `now` (called under the lock)."""
        window = self.settings.rpm_window_s
        levels = {}
        for what, limit in self._limits().items():
            level, when = self._buckets.get(what, (limit, now))
            levels[what] = min(limit, level + (now - when) * limit / window)
        return levels

    def admit(self, now: float, tokens: int = 0) -> float | None:
        """None if the request fits the limits (and is counted), else the seconds until it
        would."""
        with self._lock:
            levels, limits = self._levels(now), self._limits()
            cost = {"requests": 1.0, "tokens": float(min(tokens, self.settings.tpm or 0))}
            short = {what: cost[what] - level for what, level in levels.items()}
            if any(gap > 0 for gap in short.values()):
                window = self.settings.rpm_window_s
                return max(0.01, *(gap * window / limits[w] for w, gap in short.items()))
            self._buckets = {w: (level - cost[w], now) for w, level in levels.items()}
            return None

    def limit_headers(self, now: float) -> dict[str, str]:
        """x-ratelimit-limit-*, -remaining-* and -reset-* (the time until full) per limit."""
        with self._lock:
            levels, limits = self._levels(now), self._limits()
        window, headers = self.settings.rpm_window_s, {}
        for what, limit in limits.items():
            headers[f"x-ratelimit-limit-{what}"] = f"{limit:g}"
            headers[f"x-ratelimit-remaining-{what}"] = str(int(levels[what]))
            full_in = (limit - levels[what]) * window / limit
            headers[f"x-ratelimit-reset-{what}"] = f"{full_in:.3f}s"
        return headers

    def record(self, entry: RequestLog) -> None:
        with self._lock:
            self._log.append(entry)
            c = self._counts
            c["requests"] += 1
            c[f"api:{entry.api}"] += 1
            c[f"status:{entry.status}"] += 1
            c[f"outcome:{entry.outcome}"] += 1
            c[f"model:{entry.model}"] += 1
            c[f"json_mode:{entry.json_mode}"] += 1
            c["audio_parts"] += entry.audio_parts
            c["audio_undecodable"] += not entry.audio_decodable
            c["answered"] += entry.status == 200

    def requests(self) -> list[RequestLog]:
        with self._lock:
            return list(self._log)

    def stats(self) -> dict[str, Any]:
        with self._lock:
            counts = dict(self._counts)
            arrivals = list(self._arrivals.values())
        grouped: dict[str, dict[str, int]] = collections.defaultdict(dict)
        for name, value in counts.items():
            group, sep, key = name.partition(":")
            if sep:
                grouped[group][key] = value
        flat = ("requests", "answered", "audio_parts", "audio_undecodable")
        return {
            **{name: counts.get(name, 0) for name in flat},
            "distinct_bodies": len(arrivals),
            "repeated_bodies": sum(1 for n in arrivals if n > 1),
            "max_arrivals": max(arrivals, default=0),
            "max_in_flight": self.max_in_flight,
            **grouped,
            "settings": self.settings.public(),
        }

    def reset(self) -> None:
        with self._lock:
            for table in (self._prefixes, self._arrivals, self._log, self._counts, self._buckets):
                table.clear()
