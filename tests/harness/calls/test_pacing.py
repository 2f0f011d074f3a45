"""The pace of a provider's calls without `rpm` (`harness.calls.pacing`): from the
rate-limit headers (requests and tokens), and 429s (additive increase, multiplicative
decrease); against the fake API, which keeps OpenAI's buckets and sends their headers."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.calls.pacing import Pacer, duration_s
from harness.config.experiment import ExperimentConfig
from harness.fake_api import FakeServer, FakeSettings
from harness.runs.runner import RunResult
from tests.conftest import run_config, write_tiny_dataset


def headers(what: str, limit: float, remaining: float, reset: str) -> dict[str, str]:
    return {
        f"x-ratelimit-limit-{what}": f"{limit:g}",
        f"X-RateLimit-Remaining-{what.title()}": f"{remaining:g}",
        f"x-ratelimit-reset-{what}": reset,
    }


@given(st.integers(0, 5), st.integers(0, 59), st.integers(0, 999))
def test_durations_as_openai_writes_them(hours: int, minutes: int, ms: int) -> None:
    text = f"{hours}h{minutes}m{ms}ms" if hours else f"{minutes}m{ms / 1000:g}s"
    assert duration_s(text) == pytest.approx(3600 * hours + 60 * minutes + ms / 1000)


@pytest.mark.parametrize(("text", "seconds"), [("20ms", 0.02), ("6m0s", 360.0), ("2", 2.0)])
def test_durations(text: str, seconds: float) -> None:
    assert duration_s(text) == seconds
    assert duration_s("soon") is None and duration_s("1s and more") is None


def test_the_tighter_refill_sets_the_pace_tokens_counted_at_the_calls_mean() -> None:
    async def paced() -> Pacer:
        pacer = Pacer(max_concurrency=8)
        # 600 requests a minute, 4 used: refills at 10/s
        pacer.observe(headers("requests", 600, 596, "0.4s"))
        assert pacer.interval == pytest.approx(0.1)
        pacer.answered({"input_tokens": 950, "output_tokens": 50})  # 1,000 tokens a call
        # 30,000 tokens a minute (500/s), so 2 s per call: tokens bind
        pacer.observe(headers("tokens", 30000, 26000, "8s") | headers("requests", 600, 599, "0.1s"))
        assert pacer.interval == pytest.approx(2.0)
        return pacer

    asyncio.run(paced())


def test_429s_halve_the_window_and_answers_grow_it_back() -> None:
    async def limited() -> list[float]:
        pacer = Pacer(max_concurrency=8)
        seen = [pacer.window]
        pacer.limited(None)
        pacer.limited(0.05)
        seen.append(pacer.window)
        for _ in range(3):
            pacer.answered({})
        seen.append(pacer.window)
        loop = asyncio.get_running_loop()
        start = loop.time()
        async with pacer:  # waits for the Retry-After
            seen.append(loop.time() - start)
        fixed = Pacer(max_concurrency=8, rpm=600)
        fixed.limited(5.0)
        fixed.observe(headers("requests", 10, 1, "1s"))
        return [*seen, fixed.window, fixed.interval]

    full, halved, grown, waited, fixed_window, fixed_interval = asyncio.run(limited())
    assert (full, halved) == (8, 2) and 3.0 < grown < 4.0 and waited >= 0.04
    assert (fixed_window, fixed_interval) == (8, pytest.approx(0.1))  # rpm set: left alone


def test_a_window_of_one_lets_one_call_at_a_time() -> None:
    async def most_at_once() -> int:
        pacer = Pacer(max_concurrency=4)
        pacer.limited(None)
        pacer.limited(None)
        busy = most = 0

        async def call() -> None:
            nonlocal busy, most
            async with pacer:
                busy += 1
                most = max(most, busy)
                await asyncio.sleep(0.01)
                busy -= 1

        await asyncio.gather(*(call() for _ in range(6)))
        return most

    assert asyncio.run(most_at_once()) == 1


@pytest.mark.parametrize("binding", ["requests", "tokens"])
def test_a_run_without_rpm_keeps_to_the_servers_limits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, binding: str
) -> None:
    """No `rpm`, 8 calls in flight allowed: the first answers' headers pace the run, so
    almost nothing is refused, and the calls arrive no faster than the binding limit allows
    (how close to it they come is a benchmark's figure: `python -m bench rate_limit`)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake")
    dataset = write_tiny_dataset(tmp_path / "data", n_items=12, n_candidates=4)
    rpm, window = 20.0, 1.0  # 20 requests a second
    with FakeServer(FakeSettings(rpm=rpm, rpm_window_s=window)) as server:
        probe = _run(tmp_path / "probe", dataset, server, limit=1)
        tokens = probe.stats.input_tokens / probe.stats.model_calls  # as the server counts
        server.configure(tpm=tokens * rpm / 2 if binding == "tokens" else None)
        server.reset()
        result = _run(tmp_path / "run", dataset, server)
        arrivals = sorted(e.arrived_s for e in server.requests() if e.status == 200)
        refused = server.stats()["outcome"].get("rpm", 0)
    assert result.stats.errors == 0 and len(arrivals) == 48
    assert refused <= 2  # before the first answer, nothing says how fast to go
    later = arrivals[len(arrivals) // 2 :]
    gap = (later[-1] - later[0]) / (len(later) - 1)
    assert gap >= 0.9 * window / rpm * (2 if binding == "tokens" else 1)


def _run(out: Path, dataset: Path, server: FakeServer, *, limit: int | None = None) -> RunResult:
    config = ExperimentConfig.model_validate(
        {
            "name": "paced",
            "dataset": str(dataset),
            "limit": limit,
            "n_bootstrap": 10,
            "provider": {
                "name": "openai-compatible",
                "model": "m",
                "base_url": server.openai_base_url,
                "max_concurrency": 8,
                "max_attempts": 10,
                "retry_wait_s": 0.02,
            },
        }
    )
    result, _ = run_config(config, out)
    return result
