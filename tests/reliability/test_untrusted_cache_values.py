"""Cache values are files the harness wrote earlier, and read as untrusted (issue 27, class 1):
a value of the wrong shape (D1) or a pickle that would expand beyond any answer's size (D2) is a
damaged entry, counted and asked again, never a crash of every run and re-run."""

from __future__ import annotations

import json
import pickle
import resource
import time
from pathlib import Path
from typing import Any

import diskcache
import pytest
from typer.testing import CliRunner

from harness.calls.cache import ResponseCache
from harness.cli.main import app
from harness.config.loading import load_experiments
from harness.fake_api import FakeServer
from harness.runs.runner import Runner
from tests.reliability.conftest import MakeDataset, fast_settings, write_experiment

WRONG_SHAPES: dict[str, Any] = {
    "empty": {},
    "text_a_number": {"text": 5},
    "tokens_as_strings": {"text": '{"score": 1}', "input_tokens": "12", "output_tokens": "x"},
    "extra_a_list": {"text": '{"score": 1}', "extra": [1, 2]},
    "extra_token_count_a_string": {"text": '{"score": 1}', "extra": {"input_audio_tokens": "many"}},
    "negative_tokens": {"text": '{"score": 1}', "input_tokens": -5},
    "bool_tokens": {"text": '{"score": 1}', "output_tokens": True},
    "scores_not_text": {"scores": [1.0, 2.0, 3.0, 4.0]},
}


def _keys(experiment: Path, tmp_path: Path) -> list[str]:
    (config,) = load_experiments(experiment)
    runner = Runner(config, cache=ResponseCache(tmp_path / "probe"), results_dir=tmp_path)
    keys = [call.key for call in runner.prepare(runner.dataset())]
    runner.cache.close()
    return keys


def _run(experiment: Path, tmp_path: Path) -> Any:
    return CliRunner().invoke(
        app,
        ["run", str(experiment), "--results-dir", str(tmp_path / "results"),
         "--cache-dir", str(tmp_path / "cache"), "--no-progress"],
    )  # fmt: skip


@pytest.mark.parametrize("shape", WRONG_SHAPES)
def test_d1_cache_entry_of_the_wrong_shape_is_a_counted_miss(
    shape: str, make_dataset: MakeDataset, tmp_path: Path
) -> None:
    """D1: `{}`, `text` as a number, token counts as strings, `extra` as a list crashed every
    run (`KeyError: 'text'` in answering, `int('many')` in pricing)."""
    dataset = make_dataset(n_items=2)
    with FakeServer(fast_settings()) as server:
        experiment = write_experiment(tmp_path / "exp.yaml", dataset, server)
        keys = _keys(experiment, tmp_path)
        cache = ResponseCache(tmp_path / "cache")
        for key in keys:
            cache.set(key, WRONG_SHAPES[shape])
        cache.close()
        result = _run(experiment, tmp_path)
        asked = server.stats()["requests"]
        again = _run(experiment, tmp_path)
    assert result.exit_code == 0, result.output
    assert asked == len(keys)  # every damaged entry asked again
    run = json.loads((tmp_path / "results" / "soak" / "run.json").read_text())
    assert run["cache_hits"] == len(keys)  # the re-run: answered from the repaired cache
    assert again.exit_code == 0, again.output
    assert f"{len(keys)} damaged cache entries" in result.output


def test_d1_a_score_answer_of_the_wrong_length_is_a_miss(tmp_path: Path) -> None:
    """D1: the shape a caller expects is checked (a scorer's answer with fewer scores than
    candidates would fail `zip(strict=True)`)."""
    cache = ResponseCache(tmp_path / "cache")
    cache.set("k", {"scores": [0.5, 0.25], "extra": {}})
    assert cache.get("k", shape="scores", length=2) == {"scores": [0.5, 0.25], "extra": {}}
    assert cache.get("k", shape="scores", length=4) is None
    assert cache.get("k", shape="chat") is None
    assert cache.damaged == {"k"}
    cache.close()


def _shared_reference_bomb(depth: int) -> bytes:
    """A small pickle of lists that each hold the one before twice: 2**depth leaves once
    anything walks it (json.dumps, scrub, a record's extra)."""
    level: list[Any] = ["x" * 64]
    for _ in range(depth):
        level = [level, level]
    return pickle.dumps({"text": "ok", "extra": {"bomb": level}}, protocol=4)


def test_d2_a_pickle_of_shared_references_is_a_damaged_entry_in_bounded_memory(
    tmp_path: Path,
) -> None:
    """D2: a ~700-byte pickle whose shared references expand to GiBs was loaded without a
    bound, and walking it aborted every run."""
    data = _shared_reference_bomb(40)
    assert len(data) < 1000
    with diskcache.Cache(str(tmp_path / "cache")) as old:
        old.set("bomb", 0)  # a row, whose value becomes the pickle
        old._sql(
            "UPDATE Cache SET mode = ?, value = ? WHERE key = ?",
            (diskcache.core.MODE_PICKLE, data, "bomb"),
        )
    cache = ResponseCache(tmp_path / "cache")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    assert cache.get("bomb") is None
    assert time.monotonic() - started < 5.0
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000  # KiB
    assert cache.damaged == {"bomb"}
    cache.close()


def test_d2_a_recursive_pickle_is_a_damaged_entry(tmp_path: Path) -> None:
    """D2: a list that holds itself never ends a walk over it."""
    loop: list[Any] = []
    loop.append(loop)
    data = pickle.dumps({"text": "ok", "extra": {"loop": loop}}, protocol=4)
    with diskcache.Cache(str(tmp_path / "cache")) as old:
        old.set("loop", 0)
        old._sql(
            "UPDATE Cache SET mode = ?, value = ? WHERE key = ?",
            (diskcache.core.MODE_PICKLE, data, "loop"),
        )
    cache = ResponseCache(tmp_path / "cache")
    assert cache.get("loop") is None and cache.damaged == {"loop"}
    cache.close()


def test_a_damaged_claims_database_says_to_remove_only_claims(tmp_path: Path) -> None:
    """Also noticed in issue 27: a damaged `claims/` database told the user to move the whole
    cache (every paid answer) aside; it holds no answers, so only it is to be removed."""
    from harness.core.errors import StorageError

    ResponseCache(tmp_path / "cache").close()
    (tmp_path / "cache" / "claims" / "cache.db").write_bytes(b"\x00not a database\xff" * 512)
    with pytest.raises(StorageError) as raised:
        ResponseCache(tmp_path / "cache")
    message = str(raised.value)
    assert "claims" in message and "rm -r" in message and "holds no answers" in message
    assert f"mv {tmp_path / 'cache'} " not in message
