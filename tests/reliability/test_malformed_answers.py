"""Malformed HTTP 200 answers (HTML, HTML labelled JSON, bodies that are not UTF-8, JSON of the
wrong shape, numbers and nesting past the JSON parser's limits) never crash a run: through
both SDKs, each is that request's transient error, retried, and with 10% of them the run
ends with full coverage, exit 0 and the metrics of a fault-free run. Any other exception a
provider raises becomes that request's error, and the run goes on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from harness.calls.cache import ResponseCache
from harness.cli.main import app
from harness.config.loading import load_experiments
from harness.fake_api import MALFORMED_KINDS, FakeServer
from harness.runs.runner import RunResult
from tests.conftest import run_experiment
from tests.reliability.conftest import (
    FAST,
    MakeDataset,
    answers_of,
    fast_settings,
    faulted,
    paid_twice,
    read_jsonl,
)

N_ITEMS = 12
PROVIDERS = {
    "gemini": lambda server: {"name": "gemini", "base_url": server.gemini_base_url},
    "openai-audio": lambda server: {"name": "openai-audio", "base_url": server.openai_base_url},
    "openai-compatible": lambda server: {
        "name": "openai-compatible",
        "model": "fake-judge",
        "base_url": server.openai_base_url,
    },
}


def _experiment(path: Path, dataset: Path, provider: dict[str, Any], name: str = "run") -> Path:
    settings = {**FAST, "max_concurrency": 8, **provider}
    config = {"name": name, "dataset": str(dataset), "provider": settings, "n_bootstrap": 200}
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _run(experiment: Path, work: Path) -> RunResult:
    (config,) = load_experiments(experiment)
    cache = ResponseCache(work / "cache")
    try:
        return run_experiment(
            config, cache=cache, results_dir=work / "results", show_progress=False
        )
    finally:
        cache.close()


@pytest.mark.parametrize("api", PROVIDERS)
@pytest.mark.parametrize("kind", MALFORMED_KINDS)
def test_a_malformed_200_is_retried_like_a_transient_fault(
    api: str, kind: str, make_dataset: MakeDataset, tmp_path: Path
) -> None:
    dataset = make_dataset(n_items=2)
    with FakeServer(fast_settings(fail_first=1, faults=(kind,))) as server:
        provider = PROVIDERS[api](server)
        experiment = _experiment(tmp_path / "exp.yaml", dataset, provider)
        result = _run(experiment, tmp_path)
        met = faulted(server)
    assert result.complete, result.stats.first_errors
    assert met == {kind: 8}  # the first arrival of every request was malformed
    assert result.stats.retries == 8 and result.stats.model_calls == 16
    records = read_jsonl(result.out_dir / "records.jsonl")
    assert all(r.get("error") is None and None not in r["scores"].values() for r in records)


def _cli_run(experiment: Path, work: Path) -> tuple[int, str]:
    result = CliRunner().invoke(
        app,
        [
            "run",
            str(experiment),
            "--results-dir",
            str(work / "results"),
            "--cache-dir",
            str(work / "cache"),
            "--no-progress",
        ],
    )
    assert "Traceback" not in result.output, result.output
    return result.exit_code, result.output


@pytest.mark.parametrize("api", PROVIDERS)
def test_ten_percent_malformed_answers_change_nothing_but_retries(
    api: str, make_dataset: MakeDataset, tmp_path: Path
) -> None:
    dataset = make_dataset(n_items=N_ITEMS, n_clips=16)
    runs = {}
    for name, rate in (("clean", 0.0), ("malformed", 0.1)):
        settings = fast_settings(fault_rate=rate, faults=MALFORMED_KINDS, seed=7)
        with FakeServer(settings) as server:
            experiment = _experiment(tmp_path / f"{name}.yaml", dataset, PROVIDERS[api](server))
            code, output = _cli_run(experiment, tmp_path / name)
            runs[name] = (code, faulted(server), paid_twice(server))
        assert code == 0, output
    assert sum(runs["clean"][1].values()) == 0
    assert 1 <= sum(runs["malformed"][1].values()) <= 4 * N_ITEMS // 2
    assert runs["malformed"][2] == 0  # nothing answered properly twice
    folder = {name: tmp_path / name / "results" / "run" for name in runs}
    records = {name: read_jsonl(folder[name] / "records.jsonl") for name in runs}
    assert answers_of(records["clean"]) == answers_of(records["malformed"])
    assert all(None not in r["scores"].values() for r in records["malformed"])
    metrics = {name: (folder[name] / "metrics.json").read_text() for name in runs}
    assert metrics["clean"] == metrics["malformed"]


def _genai_parses_big_ints_quietly() -> bool:
    """google-genai 3.6 catches ValueError (ints over `sys.get_int_max_str_digits()`) while
    computing a schema answer's `parsed`; earlier releases raised it from the call."""
    from importlib.metadata import version

    major, minor = (int(part) for part in version("google-genai").split(".")[:2])
    return (major, minor) >= (3, 6)


@pytest.mark.parametrize("mode", ["huge_number", "deep_nesting"])
def test_gemini_schema_answer_past_the_parser_limits_is_an_error_not_a_crash(
    mode: str, make_dataset: MakeDataset, tmp_path: Path
) -> None:
    """Past Python's parser limits, a schema-mode answer never crashes the run. Where
    google-genai raises while parsing it (RecursionError always, ValueError before 3.6) every
    attempt fails as a bad response; where the SDK hands the text on (a huge number from 3.6),
    the raw answer is kept and counted as unparsable by the harness's own parser."""
    dataset = make_dataset(n_items=1)
    with FakeServer(fast_settings()) as server:
        provider = {
            "name": "gemini",
            "model": f"fake-answer-{mode}",
            "base_url": server.gemini_base_url,
            "max_attempts": 2,
        }
        code, output = _cli_run(_experiment(tmp_path / "e.yaml", dataset, provider), tmp_path)
    assert code == 1, output
    records = read_jsonl(tmp_path / "results" / "run" / "records.jsonl")
    assert len(records) == 4
    if mode == "huge_number" and _genai_parses_big_ints_quietly():
        assert all("error" not in r and r["raw"].startswith('{"score": 999') for r in records)
        assert "4 unparsable" in output
    else:
        assert all(r["error"].startswith("bad_response: ") for r in records)


@pytest.mark.parametrize("mode", ["huge_number", "deep_nesting"])
def test_openai_answer_past_the_parser_limits_is_unparsable_not_a_crash(
    mode: str, make_dataset: MakeDataset, tmp_path: Path
) -> None:
    dataset = make_dataset(n_items=1)
    with FakeServer(fast_settings()) as server:
        provider = {
            "name": "openai-compatible",
            "model": f"fake-answer-{mode}",
            "base_url": server.openai_base_url,
        }
        code, output = _cli_run(_experiment(tmp_path / "e.yaml", dataset, provider), tmp_path)
    assert code == 1 and "no usable score" in output, output  # unparsable, recorded
    records = read_jsonl(tmp_path / "results" / "run" / "records.jsonl")
    assert len(records) == 4 and all(r["parse_error"] for r in records)


def test_any_exception_of_a_provider_is_that_requests_error(
    make_dataset: MakeDataset, tmp_path: Path
) -> None:
    """A provider bug (here: RuntimeError for one clip) fails that clip's calls only; they are
    not retried (a retry would not help), and every other call is answered."""
    dataset = make_dataset(n_items=4, n_clips=8)
    provider = {"name": "mock", "answers": {"c0_1": "!crash"}, "max_concurrency": 2}
    code, output = _cli_run(_experiment(tmp_path / "e.yaml", dataset, provider), tmp_path)
    assert code == 1, output
    records = read_jsonl(tmp_path / "results" / "run" / "records.jsonl")
    failed = [r for r in records if r.get("error")]
    assert len(records) == 16 and len(failed) == 2  # c0_1 is a candidate of d0 and d2
    assert all(r["candidates"] == ["c0_1"] for r in failed)
    assert all("RuntimeError" in r["error"] and "mock crash" in r["error"] for r in failed)
    run = (tmp_path / "results" / "run" / "run.json").read_text()
    assert '"retries": 0' in run
