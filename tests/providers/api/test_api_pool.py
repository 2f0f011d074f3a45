"""A pool of servers behind one provider (a list of `base_url`s): least-in-flight routing, a
server whose connection fails rests while the others take its requests (nothing lost, nothing
answered twice), it is asked again once back, and a slow server gets fewer requests."""

from __future__ import annotations

import asyncio
import collections
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.config.experiment import ExperimentConfig
from harness.core.types import ProviderError
from harness.fake_api import FakeServer, FakeSettings
from providers.api._shared import ClientPool
from providers.api.judge import same_model
from tests.conftest import run_config, write_tiny_dataset


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def refused() -> ProviderError:
    return ProviderError("connection refused", transient=True, kind="connection")


def fail_on(pool: ClientPool[str], error: ProviderError) -> str:
    with pytest.raises(ProviderError), pool.lease() as client:
        raise error
    return client


def test_a_refused_server_rests_then_is_probed_again() -> None:
    clock = Clock()
    pool: ClientPool[str] = ClientPool(["a", "b", "c"], lambda url: str(url), clock)
    dead = fail_on(pool, refused())
    for _ in range(6):  # resting: never chosen, even with nothing in flight there
        with pool.lease() as client:
            assert client != dead
    clock.now += ClientPool.DOWN_FIRST_S
    chosen = set()
    for _ in range(3):
        with pool.lease() as client:
            chosen.add(client)
    assert dead in chosen  # its rest is over: one request probes it


def test_rests_double_and_an_answer_ends_them() -> None:
    clock = Clock()
    pool: ClientPool[str] = ClientPool(["only"], lambda url: str(url), clock)
    for attempt in range(6):
        fail_on(pool, refused())
        expected = min(ClientPool.DOWN_FIRST_S * 2**attempt, ClientPool.DOWN_MAX_S)
        assert pool._down_until[0] == pytest.approx(clock.now + expected)
    with pool.lease():  # every server rests: the one back soonest is still asked
        pass
    assert pool._down_until == [0.0] and pool._failures == [0] and pool.answered == [1]


def test_a_server_refusing_thousands_of_requests_rests_at_most_the_cap() -> None:
    # A dead server under concurrency 64 and 20 attempts fails thousands of requests in a
    # row; the doubling must stop at the cap, not overflow a float at the 1,025th.
    clock = Clock()
    pool: ClientPool[str] = ClientPool(["only"], lambda url: str(url), clock)
    for _ in range(2_000):
        fail_on(pool, refused())
    assert pool._down_until[0] == pytest.approx(clock.now + ClientPool.DOWN_MAX_S)


@pytest.mark.parametrize(
    "kind", ["server_error", "bad_response", "wrong_model", "not_found", "rate_limited"]
)
def test_a_server_that_fails_fast_rests_like_a_dead_one(kind: str) -> None:
    """Issue 48: a server answering HTTP 500 or an HTML page at once was never rested, so
    least-in-flight routing sent it most of the work. The repeat of its attacks: a server
    answering 429 to everything failed a call after max attempts while two healthy ones idled,
    and a vLLM serving another model (404 "model does not exist") stopped the run."""
    clock = Clock()
    pool: ClientPool[str] = ClientPool(["a", "b"], lambda url: str(url), clock)
    bad = fail_on(pool, ProviderError("failed fast", transient=True, kind=kind))
    for _ in range(6):
        with pool.lease() as client:
            assert client != bad


def test_a_timeout_or_a_bad_request_rests_no_server() -> None:
    clock = Clock()
    pool: ClientPool[str] = ClientPool(["a", "b"], lambda url: str(url), clock)
    fail_on(pool, ProviderError("slow", transient=True, kind="timeout"))
    fail_on(pool, ProviderError("400", transient=False, kind="bad_request"))
    assert pool._down_until == [0.0, 0.0]


def test_a_model_every_server_lacks_is_still_one_permanent_error() -> None:
    """A 404 sends the request to the pool's other servers; when each of them answers 404 too,
    the model name is wrong: the error reaches the run, which stops (as with one server)."""
    pool: ClientPool[str] = ClientPool(["a", "b", "c"], lambda url: str(url), Clock())
    sent: list[str] = []

    async def send(client: str) -> str:
        sent.append(client)
        raise ProviderError("404", transient=False, kind="not_found")

    with pytest.raises(ProviderError) as raised:
        asyncio.run(pool.ask(send))
    assert raised.value.kind == "not_found" and sorted(sent) == ["a", "b", "c"]


def test_with_99_dead_servers_and_one_alive_every_call_is_answered() -> None:
    """Issue 48: a call could spend every attempt on dead servers (16 calls failed): `ask`
    sends a request that a server failed to another one at once, costing it no attempt."""
    clock = Clock()
    urls = [f"dead{i}" for i in range(99)] + ["alive"]
    pool: ClientPool[str] = ClientPool(urls, lambda url: str(url), clock)
    sent: collections.Counter[str] = collections.Counter()

    async def send(client: str) -> str:
        sent[client] += 1
        if client != "alive":
            raise refused()
        return client

    async def calls() -> int:
        failed = 0
        for _ in range(300):
            clock.now += 0.05
            try:
                assert await pool.ask(send) == "alive"
            except ProviderError:
                failed += 1
        return failed

    assert asyncio.run(calls()) == 0
    assert sent["alive"] == 300
    # each dead server is tried once, then once after each of its (doubling) rests
    assert sum(sent.values()) - 300 < 99 * 6


def test_ask_gives_up_when_every_server_failed_this_request() -> None:
    pool: ClientPool[str] = ClientPool(["a", "b"], lambda url: str(url), Clock())
    sent: list[str] = []

    async def send(client: str) -> str:
        sent.append(client)
        raise ProviderError("500", transient=True, kind="server_error")

    with pytest.raises(ProviderError):
        asyncio.run(pool.ask(send))
    assert sorted(sent) == ["a", "b"]  # each once: the call's next attempt is the runner's


def test_least_in_flight_spreads_requests() -> None:
    pool: ClientPool[str] = ClientPool(["a", "b", "c"], lambda url: str(url))
    with pool.lease() as one, pool.lease() as two, pool.lease() as three:
        assert {one, two, three} == {"a", "b", "c"}


def config(dataset: Path, urls: list[str], **provider: Any) -> ExperimentConfig:
    return ExperimentConfig.model_validate(
        {
            "name": "pool",
            "dataset": str(dataset),
            "n_bootstrap": 10,
            "provider": {
                "name": "openai-compatible",
                "model": "Qwen/Qwen2.5-Omni-7B",
                "base_url": urls,
                "max_concurrency": 8,
                "retry_wait_s": 0.02,
                "retry_max_wait_s": 0.1,
                "max_attempts": 6,
                **provider,
            },
        }
    )


@pytest.fixture(autouse=True)
def openai_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-pool-key")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


@pytest.fixture
def servers() -> Iterator[list[FakeServer]]:
    running = [FakeServer(FakeSettings(latency_s=0.05, max_concurrency=2)).start() for _ in "abc"]
    yield running
    for server in running:
        server.stop()


def answered_bodies(servers: list[FakeServer]) -> collections.Counter[str]:
    """How many times each request body was answered, over every server."""
    counts: collections.Counter[str] = collections.Counter()
    for server in servers:
        counts.update(e.body_sha256 for e in server.requests() if e.outcome.startswith("answered:"))
    return counts


def test_a_dead_server_is_routed_around(tmp_path: Path, servers: list[FakeServer]) -> None:
    dataset = write_tiny_dataset(tmp_path / "d", n_items=8)
    servers[1].stop()  # connection refused from the start
    urls = [s.openai_base_url for s in servers]
    result, records = run_config(config(dataset, urls, max_attempts=3), tmp_path)
    assert result.stats.errors == 0 and len(records) == 32
    counts = answered_bodies(servers)
    assert sum(counts.values()) == 32 and max(counts.values()) == 1


@pytest.mark.slow
def test_a_server_dying_mid_run_loses_nothing_and_is_used_again(
    tmp_path: Path, servers: list[FakeServer]
) -> None:
    # long enough that the victim is back, and out of its rest, well before the last call
    # even on a loaded machine (the run stops once every call is answered)
    dataset = write_tiny_dataset(tmp_path / "d", n_items=100)
    victim = servers[0]
    log: list[str] = []

    def kill_then_revive() -> None:
        while victim.stats()["answered"] < 10:
            time.sleep(0.01)
        victim.stop()
        log.append(f"stopped after {victim.stats()['answered']}")
        time.sleep(0.6)
        victim.start()  # same port
        log.append("back")

    chaos = threading.Thread(target=kill_then_revive)
    chaos.start()
    urls = [s.openai_base_url for s in servers]
    result, records = run_config(config(dataset, urls), tmp_path)
    chaos.join()
    assert log[-1] == "back"
    assert result.stats.errors == 0 and len(records) == 400
    counts = answered_bodies(servers)
    assert sum(counts.values()) == 400 and max(counts.values()) == 1  # none paid twice
    answered_after = victim.stats()["answered"]
    assert answered_after > int(log[0].split()[-1])  # asked again once back
    assert all(s.stats()["max_in_flight"] <= 2 for s in servers)


@pytest.mark.parametrize("fault", ["500", "html", "429"])
def test_a_server_failing_fast_gets_little_of_the_work(tmp_path: Path, fault: str) -> None:
    dataset = write_tiny_dataset(tmp_path / "d", n_items=10)
    healthy = [FakeServer(FakeSettings(latency_s=0.02)).start() for _ in "ab"]
    broken = FakeServer(FakeSettings(fault_rate=1.0, faults=(fault,))).start()
    try:
        urls = [broken.openai_base_url, *(s.openai_base_url for s in healthy)]
        result, records = run_config(config(dataset, urls, max_concurrency=4), tmp_path)
    finally:
        for server in (*healthy, broken):
            server.stop()
    assert result.stats.errors == 0 and len(records) == 40
    assert len(broken.requests()) < 10, len(broken.requests())
    # every request is counted, those sent again at once to another server too (the repeat of
    # issue 48's attacks: run.json said 144 model calls for 147 requests, 64 retries for 67 faults)
    sent = len(broken.requests()) + sum(len(s.requests()) for s in healthy)
    assert result.stats.model_calls == sent and result.stats.retries == len(broken.requests())


def test_each_record_names_the_server_that_answered(
    tmp_path: Path, servers: list[FakeServer]
) -> None:
    dataset = write_tiny_dataset(tmp_path / "d", n_items=6)
    urls = [s.openai_base_url for s in servers]
    result, records = run_config(config(dataset, urls), tmp_path)
    assert {r.extra["server"] for r in records} <= set(urls)
    run_json = json.loads((result.out_dir / "run.json").read_text())
    answered = run_json["provenance"]["endpoints"]["provider"]["answered"]
    assert sum(answered.values()) == len(records) and set(answered) <= set(urls)
    for url in urls:
        assert answered.get(url, 0) == sum(r.extra["server"] == url for r in records)


def test_a_server_answering_as_another_model_answers_nothing(tmp_path: Path) -> None:
    """Issue 48: a fast server of another model answered 167 of 240 calls of a pool."""
    dataset = write_tiny_dataset(tmp_path / "d", n_items=10)
    right = FakeServer(FakeSettings(latency_s=0.05)).start()
    other = FakeServer(FakeSettings(model="another-model")).start()
    try:
        urls = [other.openai_base_url, right.openai_base_url]
        result, records = run_config(config(dataset, urls, max_concurrency=4), tmp_path)
        alone, _ = run_config(
            config(dataset, [other.openai_base_url], max_attempts=2), tmp_path / "alone"
        )
    finally:
        right.stop()
        other.stop()
    assert result.stats.errors == 0
    assert {r.extra["server"] for r in records} == {right.openai_base_url}
    assert alone.stats.errors == 40  # a mismatch is an error, not an answer
    error = next(iter(alone.stats.first_errors.values()))
    assert "another-model" in error and other.openai_base_url in error  # which server


@pytest.mark.parametrize(
    ("asked", "answered", "same"),
    [
        ("gpt-4o", "gpt-4o-2024-08-06", True),
        ("gemini-1.5-flash", "gemini-1.5-flash-002", True),
        ("models/gemini-2.5-flash", "gemini-2.5-flash", True),
        ("claude-3-opus", "claude-3-opus-20240229", True),
        ("llama3", "llama3:latest", True),
        ("m", None, True),
        # another model whose name extends the one asked (the repeat of issue 48's attacks)
        ("gpt-4o", "gpt-4o-mini", False),
        ("Qwen/Qwen2.5-Omni-7B", "Qwen/Qwen2.5-Omni-7B-AWQ", False),
        ("gemini-2.5-flash", "gemini-2.5-flash-lite", False),
        ("gpt-4o", "gpt-4", False),
    ],
)
def test_a_dated_release_is_the_model_asked_another_model_is_not(
    asked: str, answered: str | None, same: bool
) -> None:
    assert same_model(asked, answered) is same


def test_a_slow_server_gets_fewer_requests(tmp_path: Path) -> None:
    dataset = write_tiny_dataset(tmp_path / "d", n_items=10)
    fast = FakeServer(FakeSettings(latency_s=0.01)).start()
    slow = FakeServer(FakeSettings(latency_s=0.5)).start()
    try:
        urls = [fast.openai_base_url, slow.openai_base_url]
        result, _ = run_config(config(dataset, urls, max_concurrency=4), tmp_path)
    finally:
        fast.stop()
        slow.stop()
    assert result.stats.errors == 0
    # the slow server's requests stay in flight 50x longer: the fast one takes the rest
    assert slow.stats()["answered"] * 2 < fast.stats()["answered"]


def test_the_fake_server_caps_its_concurrency() -> None:
    import httpx

    async def burst(url: str) -> list[int]:
        async with httpx.AsyncClient() as client:
            body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
            replies = await asyncio.gather(
                *(client.post(f"{url}/chat/completions", json=body) for _ in range(8))
            )
        return [r.status_code for r in replies]

    with FakeServer(FakeSettings(latency_s=0.05, max_concurrency=3)) as server:
        started = time.perf_counter()
        statuses = asyncio.run(burst(server.openai_base_url))
        elapsed = time.perf_counter() - started
        assert statuses == [200] * 8
        assert server.stats()["max_in_flight"] == 3
    assert elapsed >= 0.15  # three rounds of at most three requests
