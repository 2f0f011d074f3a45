"""What a killed run leaves behind: records are streamed to records.partial.jsonl and renamed
to records.jsonl only when complete. A partial file (possibly ending in a half-written line)
is detected and reported on the next run, which rebuilds every record from the cache."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from harness.calls.cache import ResponseCache
from harness.config.experiment import ExperimentConfig, provider_config
from harness.core.records import read_records, scan_partial
from harness.runs.runner import Runner
from tests.conftest import run_experiment
from tests.reliability.conftest import MakeDataset


def _config(dataset: Path) -> ExperimentConfig:
    return ExperimentConfig(
        name="r", dataset=dataset, provider=provider_config(name="mock"), n_bootstrap=50
    )


def test_scan_partial_counts_complete_and_torn_lines(tmp_path: Path) -> None:
    line = json.dumps({"item_id": "d0", "candidates": ["c0_0"], "scores": {"c0_0": 1.0}})
    path = tmp_path / "records.partial.jsonl"
    path.write_text(f"{line}\n{line}\n{line[:17]}")
    assert scan_partial(path) == (2, 1)
    path.write_text(f"{line}\n{{not json\n{line}\n")
    assert scan_partial(path) == (2, 1)
    path.write_text("")
    assert scan_partial(path) == (0, 0)


def test_torn_line_of_a_killed_run_is_reported_and_repaired(
    make_dataset: MakeDataset, tmp_path: Path
) -> None:
    dataset = make_dataset(n_items=3)
    results, cache = tmp_path / "results", ResponseCache(tmp_path / "cache")
    try:
        complete = run_experiment(
            _config(dataset), cache=cache, results_dir=results, show_progress=False
        )
        finished = (complete.out_dir / "records.jsonl").read_text()
        # what a kill mid-write leaves: some records and half a line
        lines = finished.splitlines(keepends=True)
        (complete.out_dir / "records.partial.jsonl").write_text("".join(lines[:5]) + lines[5][:40])

        output = io.StringIO()
        runner = Runner(
            _config(dataset),
            cache=cache,
            results_dir=results,
            console=Console(file=output, width=200),
            show_progress=False,
        )
        resumed = asyncio.run(runner.run())
    finally:
        cache.close()
    assert resumed.stats.resumed_records == 5 and resumed.stats.torn_lines == 1
    assert "left 5 complete record(s) and 1 half-written line(s), which are dropped" in (
        output.getvalue()
    )
    assert resumed.stats.model_calls == 0 and resumed.stats.cache_hits == 12
    assert not (resumed.out_dir / "records.partial.jsonl").exists()
    assert len(list(read_records(resumed.out_dir / "records.jsonl"))) == 12
    run = json.loads((resumed.out_dir / "run.json").read_text())
    assert run["torn_lines"] == 1 and run["resumed_records"] == 5


def test_a_crash_mid_run_leaves_records_jsonl_untouched(
    make_dataset: MakeDataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dataset = make_dataset(n_items=3)
    results, cache = tmp_path / "results", ResponseCache(tmp_path / "cache")
    try:
        first = run_experiment(
            _config(dataset), cache=cache, results_dir=results, show_progress=False
        )
        before = (first.out_dir / "records.jsonl").read_bytes()
        calls = 0
        original = Runner.run_call

        async def crash_on_the_sixth(self: Runner, call: object) -> object:
            nonlocal calls
            calls += 1
            if calls == 6:
                raise RuntimeError("simulated crash")
            return await original(self, call)  # type: ignore[arg-type]

        monkeypatch.setattr(Runner, "run_call", crash_on_the_sixth)
        with pytest.raises(RuntimeError, match="simulated crash"):
            run_experiment(_config(dataset), cache=cache, results_dir=results, show_progress=False)
    finally:
        cache.close()
    assert (first.out_dir / "records.jsonl").read_bytes() == before
    assert scan_partial(first.out_dir / "records.partial.jsonl")[1] == 0
