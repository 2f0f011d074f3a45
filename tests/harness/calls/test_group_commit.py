"""Group commit (`harness.calls.group_commit`): the answers of one turn of the event loop are
stored in one transaction and their claims released together; nothing a caller waited for
is lost, whether it was cancelled or the store failed."""

from __future__ import annotations

import asyncio
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest

from harness.calls.answerer import Answerer, RunStats
from harness.calls.cache import ResponseCache
from harness.calls.group_commit import GroupCommit
from harness.core.errors import StorageError
from harness.core.types import ChatRequest, ChatResponse, ProviderConfig
from providers import Judge


class EchoJudge(Judge):
    def __init__(self) -> None:
        super().__init__(ProviderConfig(name="echo"))
        self.calls = 0

    async def generate(self, request: ChatRequest) -> ChatResponse:
        self.calls += 1
        await asyncio.sleep(0)
        return ChatResponse(text=request.parts[0])


def test_answers_of_one_turn_are_stored_in_one_transaction(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "cache")
    judge = EchoJudge()
    answerer = Answerer(judge, ProviderConfig(name="echo", max_concurrency=20), cache, RunStats())
    requests = {f"k{i}": ChatRequest("system", (f"answer {i}",)) for i in range(20)}

    async def everything() -> list[tuple[dict[str, Any], bool]]:
        return await asyncio.gather(*(answerer.answer(k, r) for k, r in requests.items()))

    answers = asyncio.run(everything())
    answerer.close()
    assert judge.calls == 20 and not any(hit for _, hit in answers)
    assert answerer.commits.commits < 5  # twenty answers, a handful of transactions
    for key, request in requests.items():
        stored = cache.get(key, "chat")
        assert stored is not None and stored["text"] == request.parts[0]
    assert len(cache._claims) == 0  # every claim released
    cache.close()


def test_a_cancelled_callers_answer_is_stored_all_the_same(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "cache")
    commits = GroupCommit(cache)
    assert cache.claim("k")

    async def cancelled() -> None:
        task = asyncio.ensure_future(commits.store("k", {"text": "paid for"}))
        await asyncio.sleep(0)  # the answer is queued; the commit is not done yet
        assert cache.get("k") is None
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task
        assert task.cancelled()

    asyncio.run(cancelled())
    commits.flush()  # nothing left: the turn's commit ran
    assert cache.get("k") == {"text": "paid for"}
    assert len(cache._claims) == 0
    cache.close()


def test_a_failed_store_fails_every_caller_of_the_turn_and_frees_the_claims(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = ResponseCache(tmp_path / "cache")
    commits = GroupCommit(cache)

    def full(entries: list[tuple[str, dict[str, Any]]]) -> None:
        raise StorageError("the disk holding the response cache is full")

    monkeypatch.setattr(cache, "set_many", full)
    assert cache.claim("a") and cache.claim("b")

    async def both() -> list[Any]:
        stores = (commits.store(k, {"text": k}) for k in ("a", "b"))
        return await asyncio.gather(*stores, return_exceptions=True)

    results = asyncio.run(both())
    assert [type(r) for r in results] == [StorageError, StorageError]
    assert "full" in str(results[0])
    assert commits.commits == 0 and len(cache._claims) == 0
    cache.close()


def test_flush_stores_what_waits_when_the_loop_is_gone(tmp_path: Path) -> None:
    """`Answerer.close` flushes: an answer queued in the turn a run was stopped is kept."""
    cache = ResponseCache(tmp_path / "cache")
    answerer = Answerer(EchoJudge(), ProviderConfig(name="echo"), cache, RunStats())
    commits = answerer.commits
    loop = asyncio.new_event_loop()
    task = loop.create_task(commits.store("k", {"text": "late"}))
    loop.call_soon(loop.stop)
    loop.run_forever()  # one turn: the task queued its answer, and the loop stopped
    assert cache.get("k") is None and not task.done()
    loop.close()  # before the turn's commit ran
    answerer.close()
    assert cache.get("k") == {"text": "late"}
    cache.close()


def test_a_value_the_cache_cannot_hold_fails_its_own_call_only(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "cache")
    commits = GroupCommit(cache)

    async def three() -> list[Any]:
        values = [{"text": "a"}, {"text": object()}, {"text": "c"}]
        stores = (commits.store(f"k{i}", value) for i, value in enumerate(values))
        return await asyncio.gather(*stores, return_exceptions=True)

    results = asyncio.run(three())
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], TypeError)
    assert cache.get("k0") == {"text": "a"} and cache.get("k2") == {"text": "c"}
    assert cache.get("k1") is None and commits.failure is None  # not a storage failure
    cache.close()


def test_an_answer_left_by_an_ended_loop_is_stored_with_the_next_loops(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "cache")
    commits = GroupCommit(cache)
    loop = asyncio.new_event_loop()
    task = loop.create_task(commits.store("first", {"text": "1"}))
    loop.call_soon(loop.stop)
    loop.run_forever()  # the answer is queued; the loop ends before its commit
    assert not task.done()
    loop.close()
    asyncio.run(asyncio.wait_for(commits.store("second", {"text": "2"}), timeout=5))
    assert cache.get("first") == {"text": "1"} and cache.get("second") == {"text": "2"}
    cache.close()
