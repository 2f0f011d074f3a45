"""Every benchmark once at a tiny size, so that none can rot. No timed assertions: speed is
what `make bench` reports, not what the tests check."""

from __future__ import annotations

import importlib
import math
from pathlib import Path

import pytest

from bench import __main__ as bench_main
from bench import common
from bench.common import BenchResult


@pytest.fixture(autouse=True)
def out_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    out = tmp_path / "out"
    monkeypatch.setattr(common, "OUT", out)
    monkeypatch.setattr(bench_main, "OUT", out)
    return out


@pytest.mark.parametrize("name", list(bench_main.BENCHMARKS))
def test_benchmark_runs_at_tiny_size(name: str, tmp_path: Path) -> None:
    module = importlib.import_module(bench_main.BENCHMARKS[name][0])
    result: BenchResult = module.run("tiny", common.fresh(tmp_path / "work"))
    assert result.name == name
    assert result.summary and result.figures
    numbers = [v for v in result.figures.values() if isinstance(v, int | float)]
    assert numbers and all(math.isfinite(v) for v in numbers)
    assert result.met in (True, False, None)
    assert set(result.tracked) <= set(result.figures)  # else RESULTS.md would never compare it
    assert result.line().startswith(f"[{name}] ")


def test_main_writes_results_markdown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "RESULTS.md"
    assert bench_main.main(["metrics", "--tiny", "--results", str(results)]) == 0
    text = results.read_text()
    assert "| metrics |" in text and "- machine:" in text and "- date:" in text
    start, end = (
        float(line.rsplit(": ", 1)[1].removesuffix(" s"))
        for line in text.splitlines()
        if line.startswith("- yardstick")
    )
    assert 0 < start < 60 and 0 < end < 60
    assert capsys.readouterr().out.startswith("[metrics] ")


def test_unknown_benchmark_is_refused() -> None:
    with pytest.raises(SystemExit):
        bench_main.main(["no-such-benchmark"])


def test_synthesised_dataset_loads_with_distinct_clips_per_item(tmp_path: Path) -> None:
    from harness.core.dataset import load_dataset

    spec = common.DatasetSpec(n_items=5, n_clips=8, seconds=0.1)
    folder = common.synth_dataset(spec, tmp_path)
    dataset = load_dataset(folder)
    assert len(dataset.items) == 5 and len(dataset.clips) == 8
    assert all(len(set(item.candidates)) == 4 for item in dataset.items)
    hashes = {common_hash(p) for p in (folder / "audio").iterdir()}
    assert len(hashes) == 8
    assert common.synth_dataset(spec, tmp_path) == folder  # reused, not rewritten


def common_hash(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_too_few_clips_for_distinct_candidates_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="distinct candidates"):
        common.synth_dataset(common.DatasetSpec(n_items=2, n_clips=3, seconds=0.1), tmp_path)
