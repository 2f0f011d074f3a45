"""A shard's folder is read back as untrusted (issue 48): its shard.json, run.json, config.yaml
and summaries.jsonl, damaged in any way, are one line naming the file for `harness merge`, and
a warning (never a traceback) for `harness report`, `harness runs` and `harness view` of a
results folder holding the shard; a shard.json that asks for 10**9 shards costs nothing."""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.calls.cache import ResponseCache
from harness.cli.main import app
from harness.config.experiment import ExperimentConfig
from harness.core.errors import HarnessError
from harness.core.sharding import Shard
from harness.reports.server import LiveReport
from harness.runs.merge import merge_shards
from harness.runs.runner import Runner
from tests.conftest import write_tiny_dataset

DEEP = b"[" * 100_000 + b"]" * 100_000
DAMAGED: dict[str, dict[str, bytes]] = {
    "shard.json": {
        "deep": DEEP,
        "count_inf": b'{"index": 0, "count": 1e999, "dataset_items": 12, "items": ["d0"]}',
        "a_list": b"[1, 2]",
        "not_utf8": b'{"index": "\xff"}',
        "not_json": b'{"index": 0,',
        "items_a_string": b'{"index": 0, "count": 3, "dataset_items": 12, "items": "d0"}',
    },
    "run.json": {
        "deep": DEEP,
        "a_list": b"[1]",
        "not_utf8": b'{"calls": "\xff"}',
        "huge_number": b'{"calls": ' + b"9" * 5000 + b"}",
    },
    "config.yaml": {
        "deep": b"name: " + b"[" * 5000 + b"]" * 5000 + b"\n",
        "recursive_alias": b"name: t\nprovider: &p {inner: *p}\n",
        "a_list": b"- 1\n",
        "not_utf8": b"name: \xff\n",
    },
    "summaries.jsonl": {
        "deep": DEEP + b"\n",
        "a_list": b"[1]\n",
        "not_utf8": b'{"item_id": "\xff"}\n',
        "not_json": b'{"item_id": \n',
    },
}
CASES = [(name, kind) for name, kinds in DAMAGED.items() for kind in kinds]


def _run(config: ExperimentConfig, results: Path, cache: Path, shard: Shard) -> Path:
    store = ResponseCache(cache)
    try:
        runner = Runner(config, cache=store, results_dir=results, show_progress=False, shard=shard)
        return asyncio.run(runner.run()).out_dir
    finally:
        store.close()


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    root = tmp_path_factory.mktemp("shards")
    dataset = write_tiny_dataset(root / "data", n_items=12)
    config = ExperimentConfig.model_validate(
        {"name": "t", "dataset": str(dataset), "provider": {"name": "mock"}, "n_bootstrap": 20}
    )
    return root, [_run(config, root / "results", root / "cache", Shard(i, 3)) for i in range(3)]


@pytest.fixture
def shards(made: tuple[Path, list[Path]], tmp_path: Path) -> list[Path]:
    """A fresh copy of the three shards, in tmp_path/results."""
    _, folders = made
    copies = [tmp_path / "results" / folder.name for folder in folders]
    for folder, copy in zip(folders, copies, strict=True):
        shutil.copytree(folder, copy)
    return copies


def _no_traceback(result: Any) -> None:
    assert "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )


@pytest.mark.parametrize(("name", "kind"), CASES)
def test_a_damaged_shard_file_is_one_line_for_merge_report_runs_and_view(
    shards: list[Path], tmp_path: Path, name: str, kind: str
) -> None:
    (shards[1] / name).write_bytes(DAMAGED[name][kind])
    started = time.monotonic()
    with pytest.raises(HarnessError) as refused:
        merge_shards(shards, tmp_path / "merged")
    assert "\n" not in str(refused.value) and str(shards[1]) in str(refused.value)
    assert not (tmp_path / "merged" / "records.jsonl").exists()
    cli = CliRunner()
    merged = cli.invoke(app, ["merge", *map(str, shards), "--out", str(tmp_path / "m2")])
    _no_traceback(merged)
    assert merged.exit_code == 2
    for command in (
        ["report", str(tmp_path / "results"), "--out", str(tmp_path / "report")],
        ["runs", str(tmp_path / "results")],
    ):
        _no_traceback(cli.invoke(app, command))
    LiveReport([tmp_path / "results"]).page()  # what `harness view` serves
    assert time.monotonic() - started < 30


def test_merge_into_an_existing_file_is_one_line(shards: list[Path], tmp_path: Path) -> None:
    existing = tmp_path / "a_file"
    existing.write_text("mine\n")
    result = CliRunner().invoke(app, ["merge", *map(str, shards), "--out", str(existing)])
    _no_traceback(result)
    assert result.exit_code == 2 and "a_file" in result.output
    assert existing.read_text() == "mine\n"


def test_a_shard_json_asking_for_a_billion_shards_costs_nothing(
    shards: list[Path], tmp_path: Path
) -> None:
    for shard in shards:
        marker = shard / "shard.json"
        marker.write_text(marker.read_text().replace('"count": 3', '"count": 1000000000'))
    started = time.monotonic()
    with pytest.raises(HarnessError, match=r"shard\.json"):
        merge_shards(shards, tmp_path / "merged")
    assert time.monotonic() - started < 10


# ------------------------------------------ a merge refuses anything that changes an answer
@pytest.fixture
def own(tmp_path: Path) -> tuple[ExperimentConfig, list[Path]]:
    """Three shards of a run on a dataset of this test's own (it may change it)."""
    dataset = write_tiny_dataset(tmp_path / "data", n_items=12)
    config = ExperimentConfig.model_validate(
        {"name": "t", "dataset": str(dataset), "provider": {"name": "mock"}, "n_bootstrap": 20}
    )
    cache = tmp_path / "cache"
    return config, [_run(config, tmp_path / "results", cache, Shard(i, 3)) for i in range(3)]


def _lines(folder: Path) -> list[str]:
    return (folder / "records.jsonl").read_text().splitlines(keepends=True)


def _edit_record(folder: Path, change: Any) -> None:
    import json

    lines = _lines(folder)
    first = json.loads(lines[0])
    change(first)
    (folder / "records.jsonl").write_text(json.dumps(first) + "\n" + "".join(lines[1:]))


RECORD_DAMAGE = {
    "empty": lambda f: (f / "records.jsonl").write_text(""),
    "torn_last_line": lambda f: (f / "records.jsonl").write_text("".join(_lines(f))[:-20]),
    "last_line_dropped": lambda f: (f / "records.jsonl").write_text("".join(_lines(f)[:-1])),
    "duplicated_line": lambda f: (f / "records.jsonl").write_text(
        "".join(_lines(f) + _lines(f)[:1])
    ),
    "repeat_7": lambda f: _edit_record(f, lambda r: r.update(repeat=7)),
    "unknown_candidate": lambda f: _edit_record(
        f, lambda r: r.update(candidates=["zz"], scores={"zz": 1.0})
    ),
    "unknown_scored_candidate": lambda f: _edit_record(
        f, lambda r: r.update(scores={**r["scores"], "zz": 1.0})
    ),
}


@pytest.mark.parametrize("damage", RECORD_DAMAGE)
def test_records_that_do_not_match_their_shard_are_refused(
    own: tuple[ExperimentConfig, list[Path]], tmp_path: Path, damage: str
) -> None:
    _, folders = own
    RECORD_DAMAGE[damage](folders[1])
    with pytest.raises(HarnessError) as refused:
        merge_shards(folders, tmp_path / "merged")
    assert str(folders[1] / "records.jsonl") in str(refused.value), refused.value
    assert not (tmp_path / "merged" / "records.jsonl").exists()


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda s: s.update(calls="32"), "calls"),
        (lambda s: s["cost"].update(model="another-model"), "another-model"),
        (lambda s: s.update(errors=3), "errors"),
    ],
)
def test_a_run_json_that_does_not_match_the_shard_is_refused(
    own: tuple[ExperimentConfig, list[Path]], tmp_path: Path, change: Any, words: str
) -> None:
    import json

    _, folders = own
    stats = json.loads((folders[2] / "run.json").read_text())
    change(stats)
    (folders[2] / "run.json").write_text(json.dumps(stats))
    with pytest.raises(HarnessError, match=words):
        merge_shards(folders, tmp_path / "merged")


def _rewrite_items(dataset: Path, change: Any) -> None:
    import json

    path = dataset / "items.jsonl"
    items = [json.loads(line) for line in path.read_text().splitlines()]
    for item in items:
        change(item)
    path.write_text("".join(json.dumps(item) + "\n" for item in items))


@pytest.mark.parametrize("what", ["dialogue", "candidate_order", "audio", "caption"])
def test_a_dataset_whose_content_changed_since_the_shards_ran_is_refused(
    own: tuple[ExperimentConfig, list[Path]], tmp_path: Path, what: str
) -> None:
    import json

    import numpy as np
    import soundfile

    config, folders = own
    dataset = Path(config.dataset)
    if what == "dialogue":
        _rewrite_items(dataset, lambda i: i["dialogue"][0].update(text="something else"))
    elif what == "candidate_order":
        _rewrite_items(dataset, lambda i: i.update(candidates=i["candidates"][::-1]))
    elif what == "audio":
        soundfile.write(dataset / "audio" / "c5_1.wav", np.zeros(800, dtype=np.float32), 16000)
    else:
        clips = [json.loads(line) for line in (dataset / "clips.jsonl").read_text().splitlines()]
        clips[7]["caption"] = "another caption"
        (dataset / "clips.jsonl").write_text("".join(json.dumps(c) + "\n" for c in clips))
    with pytest.raises(HarnessError, match="changed since"):
        merge_shards(folders, tmp_path / "merged")


def test_shards_whose_templates_differ_are_refused(
    own: tuple[ExperimentConfig, list[Path]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.calls.prompting.templates import DEFAULT_PROMPTS_DIR

    config, folders = own
    prompts = tmp_path / "prompts"
    shutil.copytree(DEFAULT_PROMPTS_DIR, prompts)
    for template in prompts.glob("*.jinja"):
        template.write_text(template.read_text() + "\n{# edited between the shards #}\n")
    monkeypatch.setenv("BGM_JUDGE_PROMPTS", str(prompts))
    edited = _run(config, tmp_path / "edited", tmp_path / "cache", Shard(2, 3))
    with pytest.raises(HarnessError, match="template"):
        merge_shards([*folders[:2], edited], tmp_path / "merged")


def test_a_shard_without_template_digests_beside_shards_with_them_is_refused(
    own: tuple[ExperimentConfig, list[Path]], tmp_path: Path
) -> None:
    import json

    _, folders = own
    stats = json.loads((folders[2] / "run.json").read_text())
    del stats["templates"]  # (what a shard of an older build wrote: its templates unknown)
    (folders[2] / "run.json").write_text(json.dumps(stats))
    with pytest.raises(HarnessError, match="template digests"):
        merge_shards(folders, tmp_path / "merged")


def test_shards_of_another_harness_version_merge_with_a_loud_warning(
    own: tuple[ExperimentConfig, list[Path]], tmp_path: Path
) -> None:
    import json

    _, folders = own
    stats = json.loads((folders[0] / "run.json").read_text())
    stats["provenance"]["harness_version"] = "0.0.1"
    (folders[0] / "run.json").write_text(json.dumps(stats))
    result = CliRunner().invoke(app, ["merge", *map(str, folders), "--out", str(tmp_path / "m")])
    assert result.exit_code == 0, result.output
    assert "warning" in result.output and "0.0.1" in result.output
