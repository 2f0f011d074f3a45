"""`harness compare A B --sequential` on two experiment files against the fake API: both are
asked batch by batch through the runner, the comparison stops before two full runs' calls,
and a comparison cut short (by --max-items, or by SIGKILL) resumes from the cache without
paying for an answer twice (counted at the fake server)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from harness.calls.cache import ResponseCache
from harness.cli.main import app
from harness.config.loading import load_experiments
from harness.core.records import read_records
from harness.fake_api import FakeServer
from harness.reports.loading import load_run
from tests.conftest import run_experiment
from tests.reliability.conftest import (
    fast_settings,
    harness_command,
    paid_twice,
    wait_until,
    write_dataset,
    write_experiment,
)

N_ITEMS = 40  # 160 calls per configuration
CONCURRENCY = 4


def _answered(server: FakeServer) -> int:
    return int(server.stats().get("status", {}).get("200", 0))


def _setup(tmp_path: Path, server: FakeServer) -> tuple[Path, Path]:
    """A dataset whose human ranking puts first what model B scores highest (so B is the
    better judge; A, another model, scores at chance), and the two experiment files."""
    dataset = write_dataset(tmp_path / "data", N_ITEMS, n_clips=16)
    a = write_experiment(
        tmp_path / "a.yaml", dataset, server, "judge_a", model="fake-a", max_concurrency=CONCURRENCY
    )
    b = write_experiment(
        tmp_path / "b.yaml", dataset, server, "judge_b", model="fake-b", max_concurrency=CONCURRENCY
    )
    # B's answers, from a scratch server and cache (the fake answers depend on the request only)
    with FakeServer(fast_settings()) as scratch:
        scratch_b = write_experiment(tmp_path / "scratch.yaml", dataset, scratch, model="fake-b")
        (config,) = load_experiments(scratch_b)
        cache = ResponseCache(tmp_path / "scratch-cache")
        try:
            result = run_experiment(
                config, cache=cache, results_dir=tmp_path / "scratch", show_progress=False
            )
        finally:
            cache.close()
    best: dict[str, tuple[float, str]] = {}
    for record in read_records(result.out_dir / "records.jsonl"):
        for clip, score in record.scores.items():
            if score is not None and (
                record.item_id not in best or score > best[record.item_id][0]
            ):
                best[record.item_id] = (score, clip)
    items_path = dataset / "items.jsonl"
    items = [json.loads(line) for line in items_path.read_text().splitlines()]
    for item in items:
        top = best[item["id"]][1]
        item["human_ranking"] = [top, *(c for c in item["human_ranking"] if c != top)]
    items_path.write_text("".join(json.dumps(i) + "\n" for i in items))
    return a, b


def _compare(a: Path, b: Path, out: Path, cache: Path, *extra: str) -> dict[str, object]:
    result = CliRunner().invoke(
        app,
        ["compare", str(a), str(b), "--sequential", "--batch-size", "8", "--out", str(out),
         "--cache-dir", str(cache), *extra],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "B better" in result.output
    loaded: dict[str, object] = json.loads((out / "compare.json").read_text())
    return loaded


@pytest.mark.slow
def test_fewer_calls_than_two_full_runs_and_resume_pays_nothing_twice(tmp_path: Path) -> None:
    with FakeServer(fast_settings()) as server:
        a, b = _setup(tmp_path, server)
        cache, out = tmp_path / "cache", tmp_path / "out"
        # cut short after one batch, as a kill between batches would
        first = CliRunner().invoke(
            app,
            ["compare", str(a), str(b), "--sequential", "--batch-size", "8", "--out", str(out),
             "--cache-dir", str(cache), "--max-items", "8"],
        )  # fmt: skip
        assert first.exit_code == 0, first.output
        paid_first = _answered(server)
        assert paid_first == 2 * 8 * 4  # 8 items x 4 candidates, A and B
        report = _compare(a, b, out, cache)
        print(  # the figures of the closing note
            f"decided {report['decision']!r} after {report['n_items']} of {N_ITEMS} items: "
            f"{report['calls']} + {paid_first} model calls, {report['calls_full']} for two full runs"
        )
        assert paid_twice(server) == 0  # the first 8 items came from the cache
        assert report["decision"] == "B better"
        assert report["calls_full"] == 2 * N_ITEMS * 4
        n = report["n_items"]
        assert isinstance(n, int) and 8 < n < N_ITEMS
        assert report["calls"] == _answered(server) - paid_first == 2 * (n - 8) * 4
        # the runs hold exactly the visited items, and `harness report` reads them as such
        config = yaml.safe_load((out / "runs" / "B" / "judge_b" / "config.yaml").read_text())
        assert sorted(config["items"]) == sorted(report["items"])  # type: ignore[arg-type]
        run = load_run(out / "runs" / "B" / "judge_b")
        assert run.aggregate.n_items == n
        assert run.aggregate.metrics["hit@1"].mean == report["mean_b"]
        assert (out / "compare.png").stat().st_size > 0


@pytest.mark.slow
def test_sigkill_mid_comparison_then_resume(tmp_path: Path) -> None:
    with FakeServer(fast_settings(latency_s=0.05)) as server:
        a, b = _setup(tmp_path, server)
        cache, out = tmp_path / "cache", tmp_path / "out"
        args = ["compare", str(a), str(b), "--sequential", "--batch-size", "8", "--out", str(out)]
        env = {**os.environ, "BGM_JUDGE_CACHE": str(cache)}
        process = subprocess.Popen(
            harness_command(*args), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        wait_until(lambda: _answered(server) >= 40 or process.poll() is not None)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        assert process.returncode == -signal.SIGKILL, "the comparison ended before the kill"
        time.sleep(0.2)
        final = subprocess.run(
            harness_command(*args), env=env, capture_output=True, text=True, timeout=300
        )
        assert final.returncode == 0, final.stderr
        # only answers in flight at the kill (not yet cached) can have been paid twice
        assert paid_twice(server) <= CONCURRENCY
        report = json.loads((out / "compare.json").read_text())
    # the same decision and path as a comparison that was never interrupted
    with FakeServer(fast_settings()) as server:
        a2, b2 = _setup(tmp_path / "clean", server)
        clean = _compare(a2, b2, tmp_path / "clean-out", tmp_path / "clean-cache")
    for key in ("decision", "n_items", "cs", "items"):
        assert report[key] == clean[key]


@pytest.mark.slow
def test_budget_stops_before_the_batch_that_would_pass_it(tmp_path: Path) -> None:
    with FakeServer(fast_settings()) as server:
        a, b = _setup(tmp_path, server)
        for path in (a, b):  # priced, per million tokens
            config = yaml.safe_load(path.read_text())
            config["provider"]["prices"] = {"input": 1.0, "output": 4.0}
            path.write_text(yaml.safe_dump(config))
        out = tmp_path / "out"
        result = CliRunner().invoke(
            app,
            ["compare", str(a), str(b), "--sequential", "--batch-size", "8", "--out", str(out),
             "--cache-dir", str(tmp_path / "cache"), "--budget-usd", "0.0000001"],
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        assert result.output.startswith("undecided:")
        report = json.loads((out / "compare.json").read_text())
        assert report["n_items"] == 8 and report["reason"].startswith("the next batch would pass")
        assert 0 < report["usd"] < report["usd_full"]
        assert _answered(server) == 2 * 8 * 4


def test_a_comparison_on_a_stand_in_endpoint_is_marked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`harness compare` prints the † the docs promise for a run whose endpoint is not the
    provider's official service, as `harness run` does."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    dataset = write_dataset(tmp_path / "data", 4)
    with FakeServer(fast_settings()) as server:
        a, b = (write_experiment(tmp_path / f"{n}.yaml", dataset, server, model=n) for n in "ab")
        for path in (a, b):  # the OpenAI provider, whose official service is elsewhere
            path.write_text(path.read_text().replace("openai-compatible", "openai"))
        result = CliRunner().invoke(
            app, ["compare", str(a), str(b), "--out", str(tmp_path / "out"),
                  "--cache-dir", str(tmp_path / "cache")],
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    marks = [line for line in result.output.splitlines() if line.startswith("†")]
    url = server.openai_base_url
    assert [" ".join(line.split()) for line in marks] == [
        f"† {side}: endpoint provider: {url} (from provider.base_url) is not the provider's "
        "official service"
        for side in ("A:soak", "B:soak")
    ]
