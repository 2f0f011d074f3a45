"""400/401/403 and a wrong model name: no retries, the run stops calling the model (no request
storm), prints what failed and why, and exits with code 1 (incomplete)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from harness.cli.main import app
from harness.fake_api import FakeServer
from tests.reliability.conftest import FAST, MakeDataset, read_jsonl, write_experiment

N_ITEMS = 10  # 40 calls
CONCURRENCY = 4


@pytest.mark.parametrize(
    ("model", "kind", "hint", "max_requests"),
    [
        ("fake-error-401", "auth", "the API key was not accepted", CONCURRENCY),
        ("fake-error-403", "permission", "has no access to model", CONCURRENCY),
        ("no-such-model-error-404", "not_found", "check provider.model", CONCURRENCY),
        # a 400 may concern one request only: the run stops after a streak of them
        ("fake-error-400", "bad_request", "the request was rejected", 10 + CONCURRENCY),
    ],
)
def test_permanent_fault_fails_fast_with_a_summary_and_exit_1(
    model: str,
    kind: str,
    hint: str,
    max_requests: int,
    fake_server: FakeServer,
    make_dataset: MakeDataset,
    tmp_path: Path,
) -> None:
    dataset = make_dataset(n_items=N_ITEMS)
    experiment = write_experiment(
        tmp_path / "exp.yaml", dataset, fake_server, model=model, max_concurrency=CONCURRENCY
    )
    result = CliRunner().invoke(
        app,
        ["run", str(experiment), "--results-dir", str(tmp_path / "results"), "--no-progress"],
        env={"BGM_JUDGE_CACHE": str(tmp_path / "cache")},
    )
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)

    requests = fake_server.requests()
    bodies = {r.body_sha256 for r in requests}
    assert len(requests) <= max_requests  # the rest were never sent
    assert len(bodies) == len(requests)  # and nothing was retried

    records = read_jsonl(tmp_path / "results" / "soak" / "records.jsonl")
    assert len(records) == 4 * N_ITEMS
    assert all(r["error"].split(":")[0] in (kind, "not_sent") for r in records)
    assert sum(r["error"].startswith(kind) for r in records) == len(requests)
    run = json.loads((tmp_path / "results" / "soak" / "run.json").read_text())
    assert run["model_calls"] == len(requests) and run["retries"] == 0
    assert run["error_kinds"] == {
        kind: len(requests),
        **({"not_sent": 4 * N_ITEMS - len(requests)} if len(requests) < 4 * N_ITEMS else {}),
    }

    summary = result.stderr
    assert f"soak: {4 * N_ITEMS} of {4 * N_ITEMS} call(s) failed" in summary
    assert f"{kind} ×{len(requests)}" in summary
    assert hint in summary and "Traceback" not in result.output
    assert "Re-run the same command" in summary


def test_wrong_api_key_stops_the_run(
    fake_server: FakeServer, make_dataset: MakeDataset, tmp_path: Path
) -> None:
    fake_server.configure(api_key="the-right-key-123")
    dataset = make_dataset(n_items=N_ITEMS)
    experiment = write_experiment(
        tmp_path / "exp.yaml", dataset, fake_server, max_concurrency=CONCURRENCY
    )
    result = CliRunner().invoke(
        app,
        ["run", str(experiment), "--results-dir", str(tmp_path / "results"), "--no-progress"],
        env={"BGM_JUDGE_CACHE": str(tmp_path / "cache"), "OPENAI_API_KEY": "a-wrong-key-456"},
    )
    assert result.exit_code == 1
    assert 1 <= fake_server.stats()["requests"] <= CONCURRENCY
    assert "auth" in result.stderr and "OPENAI_API_KEY" in result.stderr
    assert "a-wrong-key-456" not in result.output


def test_a_run_that_fails_partly_still_scores_the_rest(
    make_dataset: MakeDataset, tmp_path: Path
) -> None:
    """Permanent failures among successes do not stop the run; the exit code is still 1."""
    dataset = make_dataset(n_items=N_ITEMS, n_clips=8)
    experiment = tmp_path / "exp.yaml"
    failing = {"c0_1": "!permanent", "c1_2": "!permanent"}  # in every other item
    experiment.write_text(
        json.dumps(
            {
                "name": "partial",
                "dataset": str(dataset),
                "provider": {"name": "mock", "answers": failing, "max_concurrency": 2},
            }
        )
    )
    result = CliRunner().invoke(
        app,
        ["run", str(experiment), "--results-dir", str(tmp_path / "results"), "--no-progress"],
        env={"BGM_JUDGE_CACHE": str(tmp_path / "cache")},
    )
    assert result.exit_code == 1
    records = read_jsonl(tmp_path / "results" / "partial" / "records.jsonl")
    failed = [r for r in records if "error" in r]
    assert len(failed) == N_ITEMS and all(r["error"].startswith("bad_request") for r in failed)
    assert all(None not in r["scores"].values() for r in records if "error" not in r)
    assert f"partial: {N_ITEMS} of {4 * N_ITEMS} call(s) failed (bad_request ×{N_ITEMS})" in (
        result.stderr
    )


def closed_port_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"  # nothing listens there once the probe is closed


def test_a_server_that_is_not_there_stops_the_run_after_a_streak(
    make_dataset: MakeDataset, tmp_path: Path
) -> None:
    """Connection failures are transient (a restarting server comes back), but calls that
    each used up their attempts on them, one after the other, mean nothing is listening:
    the run stops sending instead of spending every call's retries (~1 minute each by
    default) on it, and says where it was calling and what to check."""
    dataset = make_dataset(n_items=N_ITEMS)
    config = {
        "name": "soak",
        "dataset": str(dataset),
        "provider": {
            "name": "openai-compatible",
            "model": "fake-judge",
            "base_url": closed_port_url(),
            "max_concurrency": 2,
            "max_attempts": 3,
            **FAST,
        },
    }
    experiment = tmp_path / "exp.yaml"
    experiment.write_text(yaml.safe_dump(config, sort_keys=False))
    result = CliRunner().invoke(
        app,
        ["run", str(experiment), "--results-dir", str(tmp_path / "results"), "--no-progress"],
        env={"BGM_JUDGE_CACHE": str(tmp_path / "cache"), "OPENAI_API_KEY": "k"},
    )
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    run = json.loads((tmp_path / "results" / "soak" / "run.json").read_text())
    kinds = run["error_kinds"]
    assert set(kinds) == {"connection", "not_sent"}
    assert 10 <= kinds["connection"] <= 10 + 2  # the streak, and the calls already in flight
    assert kinds["connection"] + kinds["not_sent"] == 4 * N_ITEMS
    # calls between attempts when the streak ended are not sent again
    assert run["model_calls"] < 3 * 4 * N_ITEMS
    assert "is the server running" in result.stderr and "Traceback" not in result.output
