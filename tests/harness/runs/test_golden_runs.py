"""The redesign moved no number and no cache key: the quickstart and Table 7 against the fake
API, run afresh, give every figure of the `metrics.json` and every line of the `cache_keys.txt`
that the code of 2026-11-28 (before the package redesign) wrote, kept in `golden/`. A figure a
later change adds to metrics.json is allowed; one that changes is not."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.fake_api import FakeServer

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[3]
GOLDEN = Path(__file__).with_name("golden")
FAKE_PORT = 18765


def _run(experiment: str, tmp: Path, env: dict[str, str] | None = None) -> Path:
    results, cache = tmp / "results", tmp / "cache"
    args = ["run", f"experiments/{experiment}.yaml", "--results-dir", str(results)]
    args += ["--cache-dir", str(cache), "--no-progress"]
    subprocess.run(
        [sys.executable, "-c", "from harness.cli import main; main()", *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        check=True,
        capture_output=True,
    )
    return results


def _missing_or_changed(golden: Any, fresh: Any, where: str = "") -> list[str]:
    if isinstance(golden, dict):
        if not isinstance(fresh, dict):
            return [f"{where}: {fresh!r}"]
        return [
            line
            for key, value in golden.items()
            for line in _missing_or_changed(value, fresh.get(key), f"{where}.{key}")
        ]
    return [] if golden == fresh else [f"{where}: {golden!r} -> {fresh!r}"]


def _compare(name: str, results: Path) -> None:
    runs = sorted((GOLDEN / name).iterdir())
    assert runs
    for golden_run in runs:
        fresh_run = results / name / golden_run.name
        golden_metrics = json.loads((golden_run / "metrics.json").read_text())
        fresh_metrics = json.loads((fresh_run / "metrics.json").read_text())
        assert _missing_or_changed(golden_metrics, fresh_metrics, golden_run.name) == []
        keys = (golden_run / "cache_keys.txt").read_text()
        assert (fresh_run / "cache_keys.txt").read_text() == keys, golden_run.name


def test_the_quickstart_gives_the_same_figures_and_cache_keys(tmp_path: Path) -> None:
    _compare("quickstart", _run("quickstart", tmp_path))


def test_table7_on_the_fake_api_gives_the_same_figures_and_cache_keys(tmp_path: Path) -> None:
    # The base URL is part of every key: one fixed port, taken by one test process at a time.
    with open(f"/tmp/bgm-judge-golden-{FAKE_PORT}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _table7(tmp_path)


def _table7(tmp_path: Path) -> None:
    with FakeServer(port=FAKE_PORT) as server:
        env = {
            "GEMINI_BASE_URL": server.gemini_base_url,
            "GEMINI_API_KEY": "anything",
            "OPENAI_BASE_URL": server.openai_base_url,
            "OPENAI_API_KEY": "anything",
        }
        _compare("table7", _run("table7_cot", tmp_path, env))
