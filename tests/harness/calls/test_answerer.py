"""The call path on its own: sharing identical requests, retries, fail-fast, the cache."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from harness.calls.answerer import Answerer, ask_until_parsed
from harness.calls.cache import ResponseCache
from harness.calls.stats import RunStats
from harness.core.types import ChatRequest, ChatResponse, ProviderConfig, ProviderError
from providers import Judge
from providers.local._microbatch import MicroBatcher

REQUEST = ChatRequest("system", ("user",))


class ScriptedJudge(Judge):
    """Answers from a script: a ProviderError is raised, a string is answered."""

    def __init__(self, script: list[Any], delay_s: float = 0.0) -> None:
        super().__init__(ProviderConfig(name="scripted"))
        self.script, self.delay_s, self.calls = list(script), delay_s, 0

    async def generate(self, request: ChatRequest) -> ChatResponse:
        self.calls += 1
        await asyncio.sleep(self.delay_s)
        step = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(step, ProviderError):
            raise step
        return ChatResponse(text=step, input_tokens=3, output_tokens=2)


def answerer(judge: Judge, tmp_path: Path, **settings: Any) -> tuple[Answerer, ResponseCache]:
    cache = ResponseCache(tmp_path / "cache")
    config = ProviderConfig(name="scripted", retry_wait_s=0.001, retry_max_wait_s=0.01, **settings)
    return Answerer(judge, config, cache, RunStats()), cache


class UsageJudge(ScriptedJudge):
    """Answers from the script with audio, cached and reasoning token counts in `extra`."""

    async def generate(self, request: ChatRequest) -> ChatResponse:
        response = await super().generate(request)
        extra = {"input_audio_tokens": 100, "cached_input_tokens": 40, "reasoning_tokens": 7}
        return ChatResponse(text=response.text, input_tokens=150, output_tokens=9, extra=extra)


class Parsed:
    def __init__(self, text: str) -> None:
        self.error = None if text == "good" else "not good"


def test_every_token_count_is_summed_over_re_asks(tmp_path: Path) -> None:
    """A re-asked call pays for every attempt: its audio tokens too, not only the last's."""
    judge = UsageJudge(["bad", "bad", "good"])
    calls, _ = answerer(judge, tmp_path)
    asked = asyncio.run(ask_until_parsed(calls, "k", REQUEST, Parsed, reask=2))
    assert judge.calls == 3 and asked.text == "good"
    assert (asked.input_tokens, asked.output_tokens) == (450, 27)
    assert asked.extra["input_audio_tokens"] == 300
    assert asked.extra["cached_input_tokens"] == 120
    assert asked.extra["reasoning_tokens"] == 21


def test_identical_requests_in_flight_are_paid_once(tmp_path: Path) -> None:
    judge = ScriptedJudge(['{"score": 5}'], delay_s=0.05)
    path, cache = answerer(judge, tmp_path)

    async def both() -> list[tuple[dict[str, Any], bool]]:
        return await asyncio.gather(path.answer("k", REQUEST), path.answer("k", REQUEST))

    (first, first_hit), (second, second_hit) = asyncio.run(both())
    assert judge.calls == 1
    assert first["text"] == second["text"] == '{"score": 5}'
    assert sorted([first_hit, second_hit]) == [False, True]
    assert cache.get("k") == first  # stored, so the next run pays nothing
    cache.close()


def test_transient_failures_are_retried_waiting_what_the_server_asked(tmp_path: Path) -> None:
    busy = ProviderError("busy", transient=True, kind="rate_limit", retry_after=0.2)
    judge = ScriptedJudge([busy, '{"score": 1}'])
    path, cache = answerer(judge, tmp_path)

    async def timed() -> float:
        loop = asyncio.get_running_loop()
        start = loop.time()
        await path.answer("k", REQUEST)
        return loop.time() - start

    assert asyncio.run(timed()) >= 0.2
    assert judge.calls == 2 and path.stats.retries == 1 and path.stats.model_calls == 2
    cache.close()


def test_attempts_are_capped_and_errors_never_cached(tmp_path: Path) -> None:
    judge = ScriptedJudge([ProviderError("down", transient=True, kind="server_error")])
    path, cache = answerer(judge, tmp_path, max_attempts=3)
    with pytest.raises(ProviderError, match="down"):
        asyncio.run(path.answer("k", REQUEST))
    assert judge.calls == 3
    assert cache.get("k") is None
    cache.close()


def test_an_auth_failure_stops_every_later_call(tmp_path: Path) -> None:
    judge = ScriptedJudge([ProviderError("check OPENAI_API_KEY", transient=False, kind="auth")])
    path, cache = answerer(judge, tmp_path, max_attempts=5)

    async def three() -> list[BaseException | tuple[dict[str, Any], bool]]:
        first = await asyncio.gather(path.answer("a", REQUEST), return_exceptions=True)
        rest = await asyncio.gather(
            path.answer("b", REQUEST), path.answer("c", REQUEST), return_exceptions=True
        )
        return [*first, *rest]

    outcomes = asyncio.run(three())
    assert judge.calls == 1  # no retry, and nothing sent after it
    kinds = [o.kind for o in outcomes if isinstance(o, ProviderError)]
    assert kinds == ["auth", "not_sent", "not_sent"]
    cache.close()


def outcomes_of(path: Answerer, keys: list[str]) -> list[str]:
    """Each key asked in turn: "answered" or the failure's kind."""

    async def each() -> list[str]:
        kinds = []
        for key in keys:
            try:
                await path.answer(key, REQUEST)
                kinds.append("answered")
            except ProviderError as exc:
                kinds.append(exc.kind)
        return kinds

    return asyncio.run(each())


@pytest.mark.parametrize(
    ("kind", "hint"),
    [
        ("connection", "is the server running?"),
        ("timeout", "is the server answering within timeout_s?"),
        ("server_error", ""),
    ],
)
def test_ten_calls_failed_after_their_retries_stop_every_later_call(
    kind: str, hint: str, tmp_path: Path
) -> None:
    judge = ScriptedJudge([ProviderError("down", transient=True, kind=kind)])
    path, cache = answerer(judge, tmp_path, max_attempts=2)
    kinds = outcomes_of(path, [f"k{i}" for i in range(13)])
    assert kinds == [kind] * 10 + ["not_sent"] * 3
    assert judge.calls == 20  # two attempts for each of the ten, none after
    message = path._halt_reason
    assert message.startswith("after 10 calls in a row failed, each after its retries")
    assert hint in message
    cache.close()


def test_an_answer_ends_a_streak_of_failed_calls(tmp_path: Path) -> None:
    down = ProviderError("down", transient=True, kind="connection")
    judge = ScriptedJudge([*[down] * 18, "7", *[down] * 20, "7"])  # 9 calls, 1 answer, 10 calls
    path, cache = answerer(judge, tmp_path, max_attempts=2)
    kinds = outcomes_of(path, [f"k{i}" for i in range(22)])
    assert kinds == ["connection"] * 9 + ["answered"] + ["connection"] * 10 + ["not_sent"] * 2
    cache.close()


def test_once_the_cache_cannot_store_an_answer_nothing_more_is_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk: the answer in hand is lost with the run, but no later call is paid for
    an answer that could not be kept (issue 26: claims no longer fail with the store)."""
    from harness.core.errors import StorageError

    judge = ScriptedJudge(['{"score": 5}'], delay_s=0.01)
    path, cache = answerer(judge, tmp_path, max_concurrency=1)

    def full(key: str, value: dict[str, Any]) -> None:
        raise StorageError("the disk holding the response cache is full")

    monkeypatch.setattr(cache, "set", full)

    async def three() -> list[Any]:
        calls = (path.answer(f"k{i}", REQUEST) for i in range(3))
        return await asyncio.gather(*calls, return_exceptions=True)

    results = asyncio.run(three())
    assert all(isinstance(result, StorageError) for result in results)
    assert judge.calls == 1
    cache.close()


class QueuedJudge(Judge):
    """A local model behind a micro-batch queue (one call at a time): `model_s` per call."""

    def __init__(self, model_s: float) -> None:
        super().__init__(ProviderConfig(name="scripted"))
        self.model_s = model_s
        self.batcher: MicroBatcher[ChatRequest, str] = MicroBatcher(self._run, 1, wait_s=0.0)

    def _run(self, requests: list[ChatRequest]) -> list[str]:
        time.sleep(self.model_s)  # the CPU-bound model, in the batcher's worker thread
        return ['{"score": 5}' for _ in requests]

    async def generate(self, request: ChatRequest) -> ChatResponse:
        return ChatResponse(text=await self.batcher.submit(request), input_tokens=1)


def test_a_timeout_times_the_model_not_the_queue_in_front_of_it(tmp_path: Path) -> None:
    """16 calls at once to a model that takes 0.05 s each: the last waits 0.75 s in the
    queue, longer than timeout_s, and still gets its answer on its first attempt."""
    judge = QueuedJudge(0.05)
    calls, cache = answerer(judge, tmp_path, timeout_s=0.5, max_concurrency=16)

    async def every_call() -> None:
        asked = (calls.answer(f"k{i}", ChatRequest("system", (f"user {i}",))) for i in range(16))
        await asyncio.gather(*asked)

    asyncio.run(every_call())
    cache.close()
    assert (calls.stats.model_calls, calls.stats.retries) == (16, 0)
