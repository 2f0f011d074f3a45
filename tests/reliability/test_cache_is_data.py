"""The response cache is data, never code: values are stored as JSON, and a value written as a
pickle (by an older harness, or planted in a shared cache) is read without resolving any
name, so a crafted one cannot run anything: it is a damaged entry, asked again."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import diskcache
import pytest
from typer.testing import CliRunner

from harness.calls.cache import ResponseCache
from harness.cli.main import app
from harness.config.loading import load_experiments
from harness.fake_api import FakeServer
from harness.runs.runner import Runner
from tests.reliability.conftest import MakeDataset, fast_settings, write_experiment


class _Exploit:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return os.system, (f"touch {self.marker}",)


def test_values_are_stored_as_json(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "cache")
    answer = {"text": '{"score": 7.5}', "input_tokens": 12, "extra": {"é": [1, None]}}
    cache.set("k", answer)
    cache.close()
    with sqlite3.connect(tmp_path / "cache" / "cache.db") as db:
        ((mode, value),) = db.execute("SELECT mode, value FROM Cache WHERE key = 'k'")
    assert mode == 1 and json.loads(value) == answer  # plain text in the database
    reopened = ResponseCache(tmp_path / "cache")
    assert reopened.get("k") == answer
    reopened.close()


def test_answers_cached_by_an_older_harness_still_answer(tmp_path: Path) -> None:
    answer = {"text": '{"score": 7.5}', "input_tokens": 12, "output_tokens": 3, "extra": {}}
    with diskcache.Cache(str(tmp_path / "cache")) as old:  # pickled values, as before
        old.set("k", answer)
        old.set("big", {**answer, "text": "y" * 50_000})
    cache = ResponseCache(tmp_path / "cache")
    assert cache.get("k") == answer
    assert cache.get("big") == {**answer, "text": "y" * 50_000}
    assert not cache.damaged
    cache.close()


def test_a_crafted_pickle_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    with diskcache.Cache(str(tmp_path / "cache")) as old:
        old.set("k", {"text": _Exploit(marker)})
        old.set("big", [_Exploit(marker), "z" * 50_000])
    cache = ResponseCache(tmp_path / "cache")
    assert cache.get("k") is None and cache.get("big") is None
    assert cache.damaged == {"k", "big"}
    cache.close()
    assert not marker.exists()


def test_a_planted_answer_in_a_shared_cache_runs_nothing_on_harness_run(
    make_dataset: MakeDataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "pwned"
    dataset = make_dataset(n_items=2)
    with FakeServer(fast_settings()) as server:
        experiment = write_experiment(tmp_path / "exp.yaml", dataset, server)
        (config,) = load_experiments(experiment)
        runner = Runner(config, cache=ResponseCache(tmp_path / "probe"), results_dir=tmp_path)
        keys = [call.key for call in runner.prepare(runner.dataset())]
        runner.cache.close()
        with diskcache.Cache(str(tmp_path / "cache")) as shared:
            for key in keys:
                shared.set(key, {"text": _Exploit(marker)})
        result = CliRunner().invoke(
            app,
            ["run", str(experiment), "--results-dir", str(tmp_path / "results"),
             "--cache-dir", str(tmp_path / "cache"), "--no-progress"],
        )  # fmt: skip
        asked = server.stats()["requests"]
    assert result.exit_code == 0, result.output
    assert not marker.exists()
    assert asked == len(keys) == 8


def test_numpy_numbers_of_a_scorer_are_stored_as_plain_numbers(tmp_path: Path) -> None:
    import numpy as np

    cache = ResponseCache(tmp_path / "cache")
    cache.set("k", {"scores": [np.float32(0.25), np.float64(0.5)], "extra": {"v": np.arange(2)}})
    assert cache.get("k") == {"scores": [0.25, 0.5], "extra": {"v": [0, 1]}}
    cache.close()
