"""Batch mode's files read back as untrusted (issue 27, class 1): the run folder's ledger
(D13) and a job's output lines (D11, D12). A bad line costs that line (its request is asked
again), never the job's other paid answers, and never lands in the cache under a key the job
did not hold."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.calls.batch_ledger import BatchLedger
from harness.calls.cache import ResponseCache
from harness.cli.main import app
from harness.core.errors import HarnessError
from harness.fake_api import FakeServer
from harness.fake_api import openai_batches as fake_batches
from providers import create_provider, provider_options
from providers.api.openai_batch import OpenAIBatchApi
from providers.batch import BatchResults
from tests.reliability.conftest import fast_settings, read_jsonl, write_dataset
from tests.support.chat_completion import chat_completion

BATCH = {"batch": True, "batch_poll_s": 0.02, "batch_collect_s": 0.05}

BAD_LEDGER_LINES = [
    "[" * 100_000 + "]" * 100_000,
    json.dumps({"event": "submitting", "label": "x", "keys": 5, "api": "a"}),
    json.dumps({"event": "submitting", "label": "y", "keys": [1, {"a": 2}], "api": "a"}),
    json.dumps({"event": "submitting", "label": {"a": 1}, "keys": ["k"], "api": "a"}),
    json.dumps({"event": "submitted", "label": "z", "id": ["not", "an", "id"]}),
    json.dumps({"event": 5, "label": "z"}),
    json.dumps(["event", "submitting"]),
    "\xff\xfe not json",
]


def test_d13_damaged_ledger_lines_are_skipped_and_counted(tmp_path: Path) -> None:
    """D13: a line nested 100k deep, `"keys": 5`, keys that are not strings failed every
    request on every re-run."""
    ledger = BatchLedger(tmp_path / "batches.jsonl")
    ledger.submitting("good", ["k1", "k2"], "api")
    with ledger.path.open("a", encoding="utf-8") as handle:
        handle.write("\n".join(BAD_LEDGER_LINES) + "\n")
    ledger.submitted("good", "batch_good")
    entries = ledger.open_entries()
    assert [(e.label, e.batch_id, e.keys) for e in entries] == [
        ("good", "batch_good", ["k1", "k2"])
    ]
    assert ledger.torn_lines == len(BAD_LEDGER_LINES)


def test_d13_a_ledger_that_is_a_folder_is_one_line(tmp_path: Path) -> None:
    """D13: a `batches.jsonl` that is a folder failed every request; it is one line saying
    what to do, before anything is sent."""
    (tmp_path / "batches.jsonl").mkdir()
    with pytest.raises(HarnessError, match=r"batches\.jsonl.*not a file"):
        BatchLedger(tmp_path / "batches.jsonl").open_entries()


def _experiment(path: Path, dataset: Path, server: FakeServer) -> Path:
    import yaml

    block = {
        "name": "openai-compatible",
        "model": "fake-judge",
        "base_url": server.openai_base_url,
        "retry_wait_s": 0.01,
        "retry_max_wait_s": 0.05,
        "timeout_s": 5.0,
        **BATCH,
    }
    config = {"name": "batch", "dataset": str(dataset), "provider": block, "n_bootstrap": 50}
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _run(experiment: Path, tmp_path: Path) -> Any:
    return CliRunner().invoke(
        app,
        ["run", str(experiment), "--results-dir", str(tmp_path / "results"),
         "--cache-dir", str(tmp_path / "cache"), "--no-progress"],
    )  # fmt: skip


@pytest.mark.slow
def test_d13_a_ledger_folder_in_a_run_is_one_line_and_exit_2(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "data", n_items=2)
    (tmp_path / "results" / "batch" / "batches.jsonl").mkdir(parents=True)
    with FakeServer(fast_settings()) as server:
        result = _run(_experiment(tmp_path / "exp.yaml", dataset, server), tmp_path)
        asked = server.stats()["requests"]
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and asked == 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "batches.jsonl" in lines[0], result.stderr


def _api() -> OpenAIBatchApi:
    block = {"name": "openai-compatible", "model": "m", "base_url": "http://127.0.0.1:9/v1"}
    judge = create_provider(provider_options({**block, "batch": True}))
    api = judge.batch_api()  # type: ignore[attr-defined]
    assert isinstance(api, OpenAIBatchApi)
    return api


def _answer_line(custom_id: str, text: str = '{"score": 3}') -> str:
    body = chat_completion(text, prompt_tokens=5)
    return json.dumps(
        {"custom_id": custom_id, "response": {"status_code": 200, "body": body}, "error": None}
    )


BAD_OUTPUT_LINES = [
    json.dumps({"custom_id": "bad", "response": "a string", "error": None}),
    json.dumps({"custom_id": "bad", "response": None, "error": "a string"}),
    json.dumps({"custom_id": "bad", "response": {"status_code": 500, "body": "x"}, "error": 5}),
    json.dumps({"custom_id": "bad", "response": {"status_code": 200, "body": [1]}}),
    json.dumps({"custom_id": "bad", "response": {"status_code": True}, "error": None}),
    json.dumps({"custom_id": "bad", "response": [1, 2], "error": [3]}),
    "[" * 100_000,
]


@pytest.mark.parametrize("line", BAD_OUTPUT_LINES)
def test_d11_one_bad_output_line_costs_that_line_only(line: str) -> None:
    """D11: one output line whose `response` or `error` is a string lost the whole job and
    all its paid answers (`_read_line`'s reading outside its try)."""
    api = _api()
    results = BatchResults()
    api._read_line(_answer_line("good"), "batch_1", results)
    api._read_line(line, "batch_1", results)
    assert set(results.answers) == {"good"}
    assert "bad" not in results.answers
    assert len(results.unreadable) + len(results.errors) >= 1


@pytest.mark.slow
def test_d11_d12_a_job_with_bad_and_stray_lines_keeps_its_good_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """D11 through the SDK: the job's other answers are kept (not re-bought). D12: an output
    line for a key that was never in the job is not stored in the cache."""
    real = fake_batches._output_files
    state: dict[str, Any] = {"done": False}

    def with_bad_lines(job: Any, book: Any) -> None:
        real(job, book)
        if state["done"]:
            return
        state["done"] = True
        file_id = job.files["output"]
        name, content = book.files[file_id]
        first = json.loads(content.splitlines()[0])
        first["response"] = "a string"  # D11
        stray = json.loads(content.splitlines()[1])
        stray["custom_id"] = "f" * 64  # D12: a key the job never held
        lines = [json.dumps(first), *content.decode().splitlines()[1:], json.dumps(stray)]
        book.files[file_id] = (name, ("\n".join(lines) + "\n").encode())

    monkeypatch.setattr(fake_batches, "_output_files", with_bad_lines)
    dataset = write_dataset(tmp_path / "data", n_items=2)
    with FakeServer(fast_settings()) as server:
        result = _run(_experiment(tmp_path / "exp.yaml", dataset, server), tmp_path)
    assert result.exit_code == 0, result.output
    records = read_jsonl(tmp_path / "results" / "batch" / "records.jsonl")
    assert len(records) == 8 and all(r.get("error") is None for r in records)
    run = json.loads((tmp_path / "results" / "batch" / "run.json").read_text())
    assert run["batch"]["requests"] == 9  # 8, then the one bad line's request again
    cache = ResponseCache(tmp_path / "cache")
    assert cache.get("f" * 64) is None
    cache.close()
