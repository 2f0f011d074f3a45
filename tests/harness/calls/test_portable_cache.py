"""Portable caches: `harness cache export/import` carry a run's answers (or the whole cache) to
another machine in one file that answers every call there; an import never replaces an answer;
a damaged file is refused whole, naming the line; a seed cache (a folder read through SQLite
read-only, or an exported file) answers misses and its answers are copied in."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.calls.cache import ResponseCache
from harness.calls.portable_cache import (
    KEYS_FILE,
    FolderSeed,
    export_cache,
    import_cache,
    open_seed,
    read_portable,
    run_keys,
)
from harness.cli.main import app
from harness.config.experiment import ExperimentConfig
from harness.core.errors import DatasetError, HarnessError
from harness.fake_api import FakeServer
from harness.runs.runner import Runner, RunResult
from tests.conftest import write_tiny_dataset
from tests.harness.protocols.test_refine import write_refine_dataset

cli = CliRunner()


def experiment(tmp_path: Path, extra: str = "") -> Path:
    dataset = write_tiny_dataset(tmp_path / "data", n_items=3)
    path = tmp_path / "exp.yaml"
    path.write_text(
        f"name: t\ndataset: {dataset}\nprovider: {{name: mock, answers: {{c0_0: ['Score: 7', "
        "'{\"score\": 4}']}, reask: 1}\nrepeats: 2\nn_bootstrap: 50\n" + extra
    )
    return path


def run(exp: Path, results: Path, cache: Path, *more: str) -> dict[str, object]:
    args = ["run", str(exp), "--no-progress", "--results-dir", str(results), "--cache-dir"]
    done = cli.invoke(app, [*args, str(cache), *more])
    assert done.exit_code == 0, done.output
    stats: dict[str, object] = json.loads((results / "t" / "run.json").read_text())
    return stats


def test_an_exported_run_answers_every_call_in_a_fresh_cache(tmp_path: Path) -> None:
    exp = experiment(tmp_path)
    first = run(exp, tmp_path / "r1", tmp_path / "c1")
    assert first["model_calls"] == 13  # 12 calls (repeats share them) and one re-ask
    keys = (tmp_path / "r1" / "t" / KEYS_FILE).read_text().split()
    assert len(keys) == 13 and keys == sorted(keys)
    out = tmp_path / "moved" / "answers.jsonl.gz"
    done = cli.invoke(
        app,
        [
            "cache",
            "export",
            str(out),
            "--run",
            str(tmp_path / "r1"),
            "--cache-dir",
            str(tmp_path / "c1"),
        ],
    )
    assert done.exit_code == 0, done.output
    assert "exported 13 answer(s)" in done.output
    done = cli.invoke(app, ["cache", "import", str(out), "--cache-dir", str(tmp_path / "c2")])
    assert done.exit_code == 0, done.output
    assert "imported 13 new answer(s)" in done.output and "0 were there already" in done.output
    again = run(exp, tmp_path / "r2", tmp_path / "c2")
    assert again["model_calls"] == 0 and again["cache_hits"] == 24
    before = (tmp_path / "r1" / "t" / "metrics.json").read_bytes()
    assert (tmp_path / "r2" / "t" / "metrics.json").read_bytes() == before


def test_import_never_replaces_and_counts_both(tmp_path: Path) -> None:
    source = ResponseCache(tmp_path / "a")
    for i in range(4):
        source.set(f"k{i}", {"text": f"from a {i}"})
    export_cache(source, tmp_path / "a.jsonl.gz")
    source.close()
    target = ResponseCache(tmp_path / "b")
    target.set("k1", {"text": "mine"})
    done = import_cache(target, tmp_path / "a.jsonl.gz")
    assert (done.added, done.kept) == (3, 1)
    assert target.get("k1") == {"text": "mine"}
    assert target.get("k3") == {"text": "from a 3"}
    assert import_cache(target, tmp_path / "a.jsonl.gz").added == 0
    target.close()


def test_the_file_is_deterministic_and_documented(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c")
    cache.set("b" * 64, {"text": "second", "latency_s": 0.5})
    cache.set("a" * 64, {"text": "first"})
    export_cache(cache, tmp_path / "one.gz")
    export_cache(cache, tmp_path / "two.gz")
    cache.close()
    assert (tmp_path / "one.gz").read_bytes() == (tmp_path / "two.gz").read_bytes()
    with gzip.open(tmp_path / "one.gz") as handle:
        lines = [json.loads(line) for line in handle]
    assert lines[0] == {
        "format": "bgm-judge-cache",
        "version": 1,
        "cache_schema": 1,
        "harness": lines[0]["harness"],
    }
    assert [line.get("key") for line in lines[1:3]] == ["a" * 64, "b" * 64]
    assert lines[3] == {"end": True, "entries": 2}
    formats = (Path(__file__).parents[3] / "docs" / "formats.md").read_text()
    assert '"format": "bgm-judge-cache"' in formats and '{"end": true, "entries":' in formats


def write_lines(path: Path, lines: list[str]) -> Path:
    with gzip.open(path, "wt") as handle:
        handle.write("".join(line + "\n" for line in lines))
    return path


HEADER = '{"format": "bgm-judge-cache", "version": 1, "cache_schema": 1}'


@pytest.mark.parametrize(
    ("lines", "where", "reason"),
    [
        (['{"format": "other"}'], ":1:", "not a bgm-judge cache export"),
        (['{"format": "bgm-judge-cache", "version": 9, "cache_schema": 1}'], ":1:", "newer"),
        (['{"format": "bgm-judge-cache", "version": 1, "cache_schema": 0}'], ":1:", "schema 0"),
        ([HEADER, '{"key": "k", "value": {"text": "x"}}'], ":2:", "truncated"),
        ([HEADER, "not json", '{"end": true, "entries": 0}'], ":2:", "not valid JSON"),
        ([HEADER, '{"key": "k", "value": 3}'], ":2:", "expected {'key'"),
        ([HEADER, '{"end": true, "entries": 5}'], ":2:", "counts 5 entries, not 0"),
    ],
)
def test_a_damaged_file_is_refused_naming_the_line(
    tmp_path: Path, lines: list[str], where: str, reason: str
) -> None:
    path = write_lines(tmp_path / "bad.gz", lines)
    with pytest.raises(DatasetError, match=reason) as caught:
        list(read_portable(path))
    assert f"bad.gz{where}" in str(caught.value)


def test_a_cut_file_adds_nothing(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "a")
    for i in range(200):
        cache.set(f"k{i}", {"text": "x" * 50 + str(i)})
    export_cache(cache, tmp_path / "a.gz")
    cache.close()
    data = (tmp_path / "a.gz").read_bytes()
    (tmp_path / "cut.gz").write_bytes(data[: len(data) // 2])
    done = cli.invoke(
        app, ["cache", "import", str(tmp_path / "cut.gz"), "--cache-dir", str(tmp_path / "b")]
    )
    assert done.exit_code == 2
    assert "cut.gz" in done.output and "Traceback" not in done.output
    assert len(ResponseCache(tmp_path / "b")) == 0


def test_export_needs_run_or_all_and_an_existing_cache(tmp_path: Path) -> None:
    out = str(tmp_path / "x.gz")
    for args in ([], ["--all", "--run", str(tmp_path)]):
        done = cli.invoke(app, ["cache", "export", out, *args])
        assert done.exit_code == 2 and "give --run RUN" in done.output
    done = cli.invoke(app, ["cache", "export", out, "--all", "--cache-dir", str(tmp_path / "nope")])
    assert done.exit_code == 2 and "not a response cache" in done.output
    done = cli.invoke(app, ["cache", "export", out, "--run", str(tmp_path)])
    assert done.exit_code == 2 and "no finished run in it" in done.output


def tree_digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_a_read_only_seed_folder_answers_and_is_copied_in(tmp_path: Path) -> None:
    exp = experiment(tmp_path)
    run(exp, tmp_path / "r1", tmp_path / "seed")
    before = tree_digest(tmp_path / "seed")
    for path in [tmp_path / "seed", *(tmp_path / "seed").rglob("*")]:
        path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    try:
        stats = run(
            exp, tmp_path / "r2", tmp_path / "local", "--seed-cache", str(tmp_path / "seed")
        )
        assert stats["model_calls"] == 0 and stats["seeded"] == 13
        assert tree_digest(tmp_path / "seed") == before
    finally:
        for path in [tmp_path / "seed", *(tmp_path / "seed").rglob("*")]:
            path.chmod(path.stat().st_mode | stat.S_IWUSR)
    # copied into the local cache: a run without the seed needs no model either
    stats = run(exp, tmp_path / "r3", tmp_path / "local")
    assert stats["model_calls"] == 0 and "seeded" not in stats


def test_an_exported_file_as_the_experiments_seed(tmp_path: Path) -> None:
    first = experiment(tmp_path)
    run(first, tmp_path / "r1", tmp_path / "c1")
    export = tmp_path / "all.gz"
    done = cli.invoke(
        app, ["cache", "export", str(export), "--all", "--cache-dir", str(tmp_path / "c1")]
    )
    assert done.exit_code == 0, done.output
    seeded = experiment(tmp_path, f"cache: {{seed: {export}}}\n")
    stats = run(seeded, tmp_path / "r2", tmp_path / "c2")
    assert stats["model_calls"] == 0 and stats["seeded"] == 13
    # `cache:` changes no result: the same run folder takes it without --overwrite
    run(first, tmp_path / "r2", tmp_path / "c2")


def test_a_missing_seed_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match=r"seed cache .* not found"):
        open_seed(tmp_path / "nothing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(HarnessError, match="not a response cache"):
        FolderSeed(tmp_path / "empty")


def _fresh_run(config: ExperimentConfig, results: Path, cache_dir: Path) -> RunResult:
    cache = ResponseCache(cache_dir)
    try:
        runner = Runner(config, cache=cache, results_dir=results, show_progress=False)
        return asyncio.run(runner.run())
    finally:
        cache.close()


@pytest.mark.slow
@pytest.mark.usefixtures("api_keys")
@pytest.mark.parametrize("kind", ["summaries", "refine"])
def test_every_answer_of_a_run_travels(tmp_path: Path, server: FakeServer, kind: str) -> None:
    """Summaries written by the judge, re-asks, the second turn and the LLM user's replies:
    the exported file answers all of them in a fresh cache, with no request to the server."""
    api = {"max_concurrency": 4, "retry_wait_s": 0.02, "base_url": server.openai_base_url}
    judge = {"name": "openai-audio", "model": "gpt-5-mini", **api}
    if kind == "summaries":
        dataset = write_tiny_dataset(tmp_path / "d", n_items=4)
        settings: dict[str, object] = {"inputs": {"dialogue": "summary", "music": "audio"}}
    else:
        dataset = write_refine_dataset(tmp_path / "d", n_items=4)
        settings = {
            "protocol": "refine",
            "prompt": "listwise",
            "refine": {"feedback": "simulator"},
            "user_simulator": judge,
            "inputs": {"dialogue": "query", "music": "caption"},
        }
    config = ExperimentConfig.model_validate(
        {"name": kind, "dataset": str(dataset), "provider": judge, "n_bootstrap": 20, **settings}
    )
    first = _fresh_run(config, tmp_path / "here", tmp_path / "cache-here")
    asked = len(server.requests())
    source = ResponseCache(tmp_path / "cache-here")
    keys = run_keys(first.out_dir)
    assert export_cache(source, tmp_path / "moved.gz", keys).written == len(keys) == asked
    source.close()
    target = ResponseCache(tmp_path / "cache-there")
    assert import_cache(target, tmp_path / "moved.gz").added == asked
    target.close()
    again = _fresh_run(config, tmp_path / "there", tmp_path / "cache-there")
    assert len(server.requests()) == asked  # nothing asked again
    assert again.stats.model_calls == 0
    assert (again.out_dir / "metrics.json").read_bytes() == (
        first.out_dir / "metrics.json"
    ).read_bytes()
