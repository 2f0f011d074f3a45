"""A warm run's calls rendered by a forked worker (`CallsAhead`): the same records and
metrics as when this process renders them, the same error at the same call when a later
item cannot be rendered, the rest rendered here when the worker dies, and no worker on a
cold run or after the run."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest

from harness.calls.cache import ResponseCache
from harness.config.experiment import ExperimentConfig, provider_config
from harness.core import workers
from harness.core.errors import HarnessError
from harness.protocols import calls_ahead
from harness.protocols.calls_ahead import CallsAhead
from harness.protocols.plans import Call
from harness.runs.runner import Runner, RunResult
from tests.conftest import write_tiny_dataset

pytestmark = pytest.mark.skipif(
    workers.fork_context() is None, reason="forks only on Linux with two cores"
)


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    return write_tiny_dataset(tmp_path / "data", n_items=30, seconds=0.05)  # 120 calls


@pytest.fixture
def taken_over(monkeypatch: pytest.MonkeyPatch) -> list[CallsAhead]:
    """The CallsAhead objects whose worker started, in the order the runs forked them."""
    started: list[CallsAhead] = []
    take_over = CallsAhead.take_over

    def spied(self: CallsAhead, calls: Iterator[Call]) -> Iterator[Call]:
        rest = take_over(self, calls)
        if self.started:
            started.append(self)
        return rest

    monkeypatch.setattr(CallsAhead, "take_over", spied)
    return started


def _run(dataset: Path, folder: Path, **runner: Any) -> RunResult:
    config = ExperimentConfig(
        name="t",
        dataset=dataset,
        provider=provider_config(name="mock", max_concurrency=2),  # blocks of 2 calls
        n_bootstrap=50,
    )
    cache = ResponseCache(folder / "cache")
    try:
        return asyncio.run(
            Runner(
                config, cache=cache, results_dir=folder / "results", show_progress=False, **runner
            ).run()
        )
    finally:
        cache.close()


def _files(result: RunResult) -> tuple[bytes, bytes]:
    return (result.out_dir / "records.jsonl").read_bytes(), (
        result.out_dir / "metrics.json"
    ).read_bytes()


def test_a_warm_run_renders_in_a_worker_and_writes_the_same_files(
    dataset: Path, tmp_path: Path, taken_over: list[CallsAhead], monkeypatch: pytest.MonkeyPatch
) -> None:
    cold = _run(dataset, tmp_path)
    assert not taken_over  # nothing was cached: this process renders, as the calls go out
    held: list[str] = []
    hold = ResponseCache.hold
    monkeypatch.setattr(
        ResponseCache, "hold", lambda self, rows: (held.extend(rows), hold(self, rows))
    )
    warm = _run(dataset, tmp_path)
    assert len(taken_over) == 1 and not taken_over[0].fell_back
    assert len(held) == len(set(held)) == 120  # the first block here, the rest by the worker
    assert warm.stats.cache_hits == cold.stats.calls == 120
    with_worker = _files(warm)
    monkeypatch.setattr(workers.sys, "platform", "darwin")  # no fork: rendered here
    alone = _run(dataset, tmp_path)
    assert len(taken_over) == 1 and alone.stats.cache_hits == 120
    assert _files(alone) == with_worker
    assert with_worker[0].count(b"\n") == 120


def test_a_worker_that_dies_leaves_the_rest_to_this_process(
    dataset: Path, tmp_path: Path, taken_over: list[CallsAhead], monkeypatch: pytest.MonkeyPatch
) -> None:
    _run(dataset, tmp_path)
    expected = _files(_run(dataset, tmp_path))  # warm: the worker renders every call
    assert len(taken_over) == 1 and not taken_over[0].fell_back

    def one_block_then_killed(connection: Connection, calls: Iterator[Call]) -> None:
        connection.send([next(calls), next(calls), next(calls)])
        os.kill(os.getpid(), 9)

    monkeypatch.setattr(calls_ahead, "_render", one_block_then_killed)
    warm = _run(dataset, tmp_path)
    assert len(taken_over) == 2 and taken_over[1].fell_back
    assert warm.stats.cache_hits == 120 and warm.stats.model_calls == 0
    assert _files(warm) == expected


def test_a_later_call_that_cannot_be_rendered_fails_as_it_does_without_a_worker(
    dataset: Path,
    tmp_path: Path,
    taken_over: list[CallsAhead],
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    _run(dataset, tmp_path)
    iter_calls = Runner.iter_calls

    def broken(self: Runner, data: Any) -> Iterator[Call]:
        for n, call in enumerate(iter_calls(self, data)):
            if n == 70:
                raise HarnessError(f"template failed at call {n} (item {call.item_id})")
            yield call

    monkeypatch.setattr(Runner, "iter_calls", broken)
    with pytest.raises(HarnessError) as with_worker:
        _run(dataset, tmp_path)
    assert len(taken_over) == 1 and taken_over[0].fell_back
    assert "Traceback" not in capfd.readouterr().err  # the worker's failure is not printed
    monkeypatch.setattr(workers.sys, "platform", "darwin")
    with pytest.raises(HarnessError) as alone:
        _run(dataset, tmp_path)
    assert str(with_worker.value) == str(alone.value) == "template failed at call 70 (item d17)"


def test_the_worker_is_gone_after_the_run(
    dataset: Path, tmp_path: Path, taken_over: list[CallsAhead]
) -> None:
    _run(dataset, tmp_path)
    _run(dataset, tmp_path)
    (ahead,) = taken_over
    assert ahead.worker_pid is not None
    with pytest.raises(ProcessLookupError):
        os.kill(ahead.worker_pid, 0)


def test_a_call_crosses_the_pipe_unchanged(dataset: Path, tmp_path: Path) -> None:
    import pickle

    from harness.core.types import AudioRef, ChatRequest

    config = ExperimentConfig(name="t", dataset=dataset, provider=provider_config(name="mock"))
    cache = ResponseCache(tmp_path / "cache")
    try:
        runner = Runner(config, cache=cache, results_dir=tmp_path, show_progress=False)
        call = next(runner.iter_calls(runner.dataset()))
    finally:
        cache.close()
    request = call.request.with_follow_up("no", "a JSON object, please")
    assert isinstance(request, ChatRequest)
    again = pickle.loads(pickle.dumps([call, request]))
    assert again == [call, request] and again[0].key == call.key
    (audio,) = again[1].audio
    assert isinstance(audio, AudioRef) and isinstance(audio.path, Path)
