"""The pace of a provider's calls without `rpm`: as fast as `max_concurrency` allows until the
provider says otherwise. Rate-limit headers (`x-ratelimit-*`): calls spaced to spend no faster
than the tighter refill, `(limit - remaining) / reset`, of requests and tokens. 429s: the calls
in flight halve, nothing goes before Retry-After, each answer adds 1/window back (AIMD)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from typing import Any

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def duration_s(text: str) -> float | None:
    """`"6m0s"`, `"1.5s"`, `"20ms"` or `"2"` in seconds (None: not a duration)."""
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        parts = _DURATION.findall(text)
    if not parts or "".join(n + unit for n, unit in parts) != text:
        return None
    return sum(float(n) * _SECONDS[unit] for n, unit in parts)


def _limit(headers: Mapping[str, str], what: str) -> tuple[float, float, float] | None:
    """(limit, remaining, seconds to full) of `requests` or `tokens`, when all are sent."""
    try:
        limit = float(headers[f"x-ratelimit-limit-{what}"])
        remaining = float(headers[f"x-ratelimit-remaining-{what}"])
    except (KeyError, ValueError):
        return None
    reset = duration_s(headers.get(f"x-ratelimit-reset-{what}", ""))
    return None if reset is None or limit <= 0 else (limit, remaining, reset)


class Pacer:
    """At most `max_concurrency` calls in flight (fewer after 429s), spaced `interval` s
    apart: 60 / rpm when `rpm` is set (then nothing else changes it), else as the provider
    tells (see the module's docstring)."""

    def __init__(self, max_concurrency: int, rpm: float | None = None) -> None:
        self.most = max_concurrency
        self.adaptive = not rpm
        self.window = float(max_concurrency)  # calls allowed in flight
        self.in_flight = 0
        self.interval = 60.0 / rpm if rpm else 0.0  # seconds between two sends
        self._next = 0.0  # the loop time before which nothing is sent
        self._tokens = 0.0  # tokens per call, a running mean (0: none measured yet)
        self._answered = 0
        self._slots = asyncio.Semaphore(max_concurrency)
        self._room = asyncio.Event()  # set when a call ends (the window may have room)

    async def __aenter__(self) -> None:
        await self._slots.acquire()
        try:
            while self.in_flight >= self.window:  # only slot holders wait here
                self._room.clear()
                await self._room.wait()
            self.in_flight += 1
            loop = asyncio.get_running_loop()
            now = loop.time()
            start = max(now, self._next)
            self._next = start + self.interval
            if start > now:
                await asyncio.sleep(start - now)
        except BaseException:
            await self.__aexit__()
            raise

    async def __aexit__(self, *exc: object) -> None:
        self.in_flight = max(0, self.in_flight - 1)
        self._room.set()
        self._slots.release()

    def answered(self, answer: Mapping[str, Any]) -> None:
        """An answer: the window grows back; its tokens enter the mean."""
        if not self.adaptive:
            return
        self.window = min(self.most, self.window + 1 / self.window)
        tokens = (answer.get("input_tokens") or 0) + (answer.get("output_tokens") or 0)
        if tokens:
            self._answered += 1
            self._tokens += (tokens - self._tokens) / self._answered

    def limited(self, retry_after: float | None) -> None:
        """A 429: half the window, and nothing sent before its Retry-After."""
        if not self.adaptive:
            return
        self.window = max(1.0, self.window / 2)
        if retry_after:
            loop = asyncio.get_running_loop()
            self._next = max(self._next, loop.time() + retry_after)

    def observe(self, headers: Mapping[str, str]) -> None:
        """The rate-limit headers of a response (of any status)."""
        if not self.adaptive:
            return
        headers = {k.lower(): v for k, v in headers.items()}
        paces, waits = [], []
        for what, cost in (("requests", 1.0), ("tokens", self._tokens)):
            found = _limit(headers, what)
            if found is None or not cost:
                continue
            limit, remaining, reset = found
            if reset > 0 and remaining < limit:
                refill = (limit - remaining) / reset
                paces.append(cost / refill)
                waits.append(max(0.0, cost - remaining) / refill)
        if paces:
            self.interval = max(paces)
            loop = asyncio.get_running_loop()
            self._next = max(self._next, loop.time() + max(waits))
