"""The runner end to end on the mock judge: records, parsing, re-asks, retries, cache."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from harness.calls.cache import ResponseCache
from harness.config.experiment import ExperimentConfig, provider_config
from harness.core.records import read_records
from harness.runs.runner import Runner, RunResult
from providers import create_provider
from providers.mock import MockJudge


def make_config(dataset: Path, **provider: Any) -> ExperimentConfig:
    return ExperimentConfig(
        name="t", dataset=dataset, provider=provider_config(name="mock", **provider), n_bootstrap=50
    )


def run(config: ExperimentConfig, tmp_path: Path) -> tuple[RunResult, MockJudge]:
    judge = create_provider(config.provider)
    assert isinstance(judge, MockJudge)
    cache = ResponseCache(tmp_path / "cache")
    try:
        runner = Runner(
            config,
            cache=cache,
            results_dir=tmp_path / "results",
            provider=judge,
            show_progress=False,
        )
        result = asyncio.run(runner.run())
    finally:
        cache.close()
    return result, judge


def test_records_metrics_and_report(tiny_dataset: Path, tmp_path: Path) -> None:
    result, judge = run(make_config(tiny_dataset), tmp_path)
    assert len(judge.calls) == 12
    records = list(read_records(result.out_dir / "records.jsonl"))
    assert [(r.item_id, r.candidates[0]) for r in records][:2] == [("d0", "c0_0"), ("d0", "c0_1")]
    assert all(r.raw and json.loads(r.raw)["score"] == r.scores[r.candidates[0]] for r in records)
    metrics = json.loads((result.out_dir / "metrics.json").read_text())
    assert metrics["n_items"] == 3
    assert metrics["coverage"] == 1.0
    assert set(metrics["metrics"]) == {"hit@1", "mrr", "ndcg", "kendall_tau_b"}
    assert "| t |" in (result.out_dir / "report.md").read_text()
    assert (result.out_dir / "config.yaml").is_file()


def test_audio_reaches_the_judge_with_the_prompt(tiny_dataset: Path, tmp_path: Path) -> None:
    _, judge = run(make_config(tiny_dataset), tmp_path)
    request = judge.calls[0]
    assert len(request.audio) == 1
    assert "A: Hello" in request.user_text and "<audio>" in request.user_text
    assert request.response_schema is not None


def test_rerun_makes_zero_calls_and_identical_metrics(tiny_dataset: Path, tmp_path: Path) -> None:
    first, _ = run(make_config(tiny_dataset), tmp_path)
    metrics = (first.out_dir / "metrics.json").read_bytes()
    records = (first.out_dir / "records.jsonl").read_text()
    second, judge = run(make_config(tiny_dataset), tmp_path)
    assert judge.calls == []
    assert second.stats.cache_hits == 12
    assert (second.out_dir / "metrics.json").read_bytes() == metrics
    assert records.replace('"cache_hit":true,', "") == (
        second.out_dir / "records.jsonl"
    ).read_text().replace('"cache_hit":true,', "")


def test_unparsable_answer_is_kept_raw_reasked_and_counted(
    tiny_dataset: Path, tmp_path: Path
) -> None:
    config = make_config(tiny_dataset, answers={"c0_0": ["Score: 7", '{"score": 11}']}, reask=1)
    result, judge = run(config, tmp_path)
    assert len(judge.calls) == 13
    (bad,) = [r for r in read_records(result.out_dir / "records.jsonl") if r.candidates == ["c0_0"]]
    assert bad.scores == {"c0_0": None}
    assert bad.attempts == ["Score: 7"]
    assert bad.raw == '{"score": 11}'
    assert bad.parse_error is not None and bad.parse_error.startswith("out_of_range")
    assert result.stats.parse_failures == 1
    assert result.aggregate.coverage == pytest.approx(11 / 12)
    # Unparsable answers are cached: a rerun re-parses them without calling the model.
    _, again = run(config, tmp_path)
    assert again.calls == []


def test_a_reask_carries_the_answer_and_why_it_was_rejected(
    tiny_dataset: Path, tmp_path: Path
) -> None:
    config = make_config(tiny_dataset, answers={"c0_0": ["Score: 7", '{"score": 7}']}, reask=2)
    _, judge = run(config, tmp_path)
    first, again = [c for c in judge.calls if c.audio[0].clip_id == "c0_0"]
    assert first.follow_ups == ()
    assert (again.system, again.parts) == (first.system, first.parts)
    (turn,) = again.follow_ups
    assert turn.answer == "Score: 7"
    assert turn.reply.startswith("Your answer could not be used: not_json: ")
    assert again.key_fields() != first.key_fields()


def test_first_attempts_keep_their_cache_keys(tiny_dataset: Path, tmp_path: Path) -> None:
    from harness.calls.cache import request_key
    from harness.core.types import ChatRequest

    request = ChatRequest("system", ("user",), {"type": "object"})
    key = request_key({"model": "m"}, request, template="t", repeat=None)
    # The key this request had before requests could carry follow-ups.
    assert key == "851dd1983b476ec318cac2968f6b2bc2c7698992ce81cb08e64a2d103625b02a"


def test_transient_failure_is_retried(tiny_dataset: Path, tmp_path: Path) -> None:
    result, judge = run(make_config(tiny_dataset, answers={"c1_1": ["!transient", 4.0]}), tmp_path)
    assert result.complete
    assert result.stats.retries == 1
    assert len(judge.calls) == 13


def test_permanent_failure_is_not_retried_nor_cached(tiny_dataset: Path, tmp_path: Path) -> None:
    config = make_config(tiny_dataset, answers={"c1_1": "!permanent"}, max_attempts=5)
    result, judge = run(config, tmp_path)
    assert not result.complete
    assert len(judge.calls) == 12
    assert result.stats.error_kinds == {"bad_request": 1}
    (failed,) = [r for r in read_records(result.out_dir / "records.jsonl") if r.error]
    assert failed.candidates == ["c1_1"] and failed.raw is None
    assert "Failures by kind: bad_request: 1" in (result.out_dir / "report.md").read_text()
    _, again = run(config, tmp_path)  # the failure was not cached: only it is asked again
    assert [r.audio[0].clip_id for r in again.calls] == ["c1_1"]


def test_cache_key_follows_content_not_paths_or_run_settings(
    tiny_dataset: Path, tmp_path: Path
) -> None:
    def keys(config: ExperimentConfig) -> list[str]:
        runner = Runner(
            config, cache=ResponseCache(tmp_path / "k"), results_dir=tmp_path, show_progress=False
        )
        return [c.key for c in runner.prepare(runner.dataset())]

    base = keys(make_config(tiny_dataset))
    assert keys(make_config(tiny_dataset, max_concurrency=3, rpm=100)) == base
    assert keys(make_config(tiny_dataset, temperature=0.5)) != base
    moved = tmp_path / "moved"
    tiny_dataset.rename(moved)
    assert keys(make_config(moved)) == base
    # Same bytes under another clip file name: same key for that call.
    (moved / "audio" / "c0_0.wav").rename(moved / "audio" / "renamed.wav")
    clips = (moved / "clips.jsonl").read_text().replace("audio/c0_0.wav", "audio/renamed.wav")
    (moved / "clips.jsonl").write_text(clips)
    assert keys(make_config(moved)) == base


def test_repeats_share_answers_when_decoding_is_greedy(tiny_dataset: Path, tmp_path: Path) -> None:
    config = make_config(tiny_dataset).model_copy(update={"repeats": 2})
    result, judge = run(config, tmp_path)
    assert result.stats.calls == 24
    assert len(judge.calls) == 12  # repeat 1 is answered from the cache
    sampled = make_config(tiny_dataset, temperature=0.7).model_copy(
        update={"repeats": 2, "name": "t_sampled"}  # another configuration: another folder
    )
    _, judge = run(sampled, tmp_path)
    assert len(judge.calls) == 24


def test_first_calls_go_out_while_later_ones_are_still_prepared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.conftest import write_tiny_dataset

    dataset = write_tiny_dataset(tmp_path / "data", n_items=10, seconds=0.05)
    config = make_config(dataset, max_concurrency=4)
    judge = create_provider(config.provider)
    assert isinstance(judge, MockJudge)
    sent_when_prepared: list[int] = []
    runner = Runner(
        config,
        cache=ResponseCache(tmp_path / "cache"),
        results_dir=tmp_path / "results",
        provider=judge,
        show_progress=False,
    )
    iter_calls = runner.iter_calls

    def watched(data: Any) -> Any:
        for call in iter_calls(data):
            sent_when_prepared.append(len(judge.calls))
            yield call

    monkeypatch.setattr(runner, "iter_calls", watched)
    result = asyncio.run(runner.run())
    assert result.stats.calls == len(judge.calls) == 40
    assert sent_when_prepared[0] == 0
    assert sent_when_prepared[-1] > 0  # requests were under way before the last was rendered


def test_calls_are_prepared_only_a_bounded_window_ahead_of_their_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Memory stays flat in the number of calls: a call is rendered and started only while
    fewer than `in_flight_limit()` are unfinished, not all of them at the start."""
    import harness.runs.runner as runner_module
    from tests.conftest import write_tiny_dataset

    monkeypatch.setattr(runner_module, "IN_FLIGHT_MIN", 6)
    monkeypatch.setattr(runner_module, "IN_FLIGHT_PER_SLOT", 3)
    dataset = write_tiny_dataset(tmp_path / "data", n_items=15, seconds=0.05)
    config = make_config(dataset, max_concurrency=2, delay_s=0.002)
    runner = Runner(
        config,
        cache=ResponseCache(tmp_path / "cache"),
        results_dir=tmp_path / "results",
        show_progress=False,
    )
    assert runner.in_flight_limit() == 6
    unfinished: list[int] = []
    prepared = finished = 0
    iter_calls, run_call = runner.iter_calls, runner.run_call

    def watched(data: Any) -> Any:
        nonlocal prepared
        for call in iter_calls(data):
            unfinished.append(prepared - finished)
            prepared += 1
            yield call

    async def counted(call: Any) -> Any:
        nonlocal finished
        try:
            return await run_call(call)
        finally:
            finished += 1

    monkeypatch.setattr(runner, "iter_calls", watched)
    monkeypatch.setattr(runner, "run_call", counted)
    result = asyncio.run(runner.run())
    assert result.stats.calls == prepared == 60 and result.stats.errors == 0
    assert max(unfinished) == 5  # the window is full, never more
    assert len(list(read_records(result.out_dir / "records.jsonl"))) == 60


def test_a_preparation_error_cancels_the_calls_already_started(
    tiny_dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.core.errors import HarnessError

    config = make_config(tiny_dataset, max_concurrency=1, delay_s=30.0)
    runner = Runner(
        config,
        cache=ResponseCache(tmp_path / "cache"),
        results_dir=tmp_path / "results",
        show_progress=False,
    )
    iter_calls = runner.iter_calls

    def broken(data: Any) -> Any:
        calls = iter_calls(data)
        yield next(calls)
        yield next(calls)
        raise HarnessError("item 2 cannot be rendered")

    monkeypatch.setattr(runner, "iter_calls", broken)

    async def run_and_list_leftovers() -> list[str]:
        with pytest.raises(HarnessError, match="cannot be rendered"):
            await runner.run()
        await asyncio.sleep(0)  # let the cancelled renewal task finish
        this = asyncio.current_task()
        return [repr(t) for t in asyncio.all_tasks() if t is not this and not t.done()]

    assert asyncio.run(run_and_list_leftovers()) == []


def test_one_task_renews_every_claim_a_long_call_holds(
    tiny_dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import harness.calls.answerer

    monkeypatch.setattr(harness.calls.answerer, "CLAIM_LEASE_S", 0.3)  # renewed every 0.1 s
    renewed: list[str] = []
    monkeypatch.setattr(ResponseCache, "renew", lambda self, key, lease_s=0: renewed.append(key))
    config = make_config(tiny_dataset, max_concurrency=12, delay_s=0.35)
    result, judge = run(config, tmp_path)
    assert len(judge.calls) == 12 and result.complete
    keys = set(renewed)
    assert len(keys) == 12 and all(renewed.count(k) >= 2 for k in keys)


def test_a_scorers_report_names_no_prompt(tiny_dataset: Path, tmp_path: Path) -> None:
    """A scorer reads no prompt, so its report.md must not claim one."""
    config = ExperimentConfig(
        name="s", dataset=tiny_dataset, provider=provider_config(name="random"), n_bootstrap=50
    )
    cache = ResponseCache(tmp_path / "cache")
    try:
        runner = Runner(config, cache=cache, results_dir=tmp_path / "results", show_progress=False)
        result = asyncio.run(runner.run())
    finally:
        cache.close()
    report = (result.out_dir / "report.md").read_text()
    assert "- prompt: none (a scorer)" in report
    assert "zero_shot" not in report


def test_the_end_of_a_run_evaluates_then_writes_its_folder(
    tiny_dataset: Path, tmp_path: Path
) -> None:
    """Evaluating writes nothing; `write_run_folder` alone writes the evaluated run's files,
    the same bytes as the run wrote."""
    from harness.runs.run_folder import write_run_folder

    config = make_config(tiny_dataset)
    result, judge = run(config, tmp_path)
    out = result.out_dir
    written = ["predictions.jsonl", "metrics.json", "run.json"]
    written += ["config.yaml", "report.md"]
    before = {name: (out / name).read_bytes() for name in written}
    for name in written:
        (out / name).unlink()
    runner = Runner(
        config,
        cache=ResponseCache(tmp_path / "c2"),
        results_dir=tmp_path / "results",
        provider=judge,
    )
    dataset = runner.dataset()
    records = list(read_records(out / "records.jsonl"))
    evaluation, metrics = runner.evaluate(dataset, records)
    files = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    assert files == ["cache_keys.txt", "records.jsonl"]  # nothing written
    assert metrics == json.loads(before["metrics.json"])
    write_run_folder(
        out,
        config,
        items=dataset.items,
        evaluation=evaluation,
        metrics=metrics,
        stats=json.loads(before["run.json"]),
    )
    assert {name: (out / name).read_bytes() for name in written} == before


@pytest.mark.parametrize("case", ["re-run", "out of order"])
def test_the_finish_reads_the_records_back_once(
    case: str, tiny_dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run evaluates and prices its records by reading records.jsonl back once:
    metrics.json is what evaluating the file gives, and run.json's cost is `run_cost` over
    the file."""
    import harness.core.records as records_module
    from harness.calls.pricing import run_cost
    from harness.core.dataset import load_dataset
    from harness.core.records import RecordsFile
    from harness.core.sanitize import dumps_json
    from harness.runs.run_folder import evaluate_run

    # a transient failure of the first call: its record comes after the others'
    answers = {"c0_0": ["!transient", 4.0]} if case == "out of order" else {}
    config = make_config(
        tiny_dataset, prices={"input": 1.0, "output": 2.0}, answers=answers, retry_wait_s=0.01
    )
    if case != "out of order":
        run(config, tmp_path)  # the cold run: the next one is answered from the cache
    reads: list[Path] = []
    read_records_as_before = records_module.read_records

    def counted(path: Path) -> Any:
        reads.append(path)
        return read_records_as_before(path)

    monkeypatch.setattr(records_module, "read_records", counted)
    result, _ = run(config, tmp_path)
    assert [p.name for p in reads] == ["records.jsonl"]
    monkeypatch.undo()
    records = RecordsFile(result.out_dir / "records.jsonl")
    _, expected = evaluate_run(
        config,
        load_dataset(tiny_dataset),
        records,
        parse_failures=result.stats.parse_failures,
        errors=result.stats.errors,
    )
    assert (result.out_dir / "metrics.json").read_text() == dumps_json(expected, indent=2) + "\n"
    cost = json.loads((result.out_dir / "run.json").read_text())["cost"]
    assert cost == run_cost(config.provider, "mock-1", records) and cost["usd"] > 0
