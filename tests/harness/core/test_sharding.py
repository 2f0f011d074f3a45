"""Sharded runs: items split by a hash of their id (stable under adding items), each shard's
run in its own folder with shard.json, and a scorer that learns from the run's items fitted on
all of them as in the unsharded run."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from harness.calls.cache import ResponseCache
from harness.cli.main import app
from harness.config.experiment import ExperimentConfig, provider_config
from harness.core.dataset import load_dataset
from harness.core.errors import HarnessError
from harness.core.records import read_records
from harness.core.sharding import SHARD_FILE, Shard, shard_of
from harness.runs.runner import Runner, RunResult
from tests.conftest import write_pool_dataset, write_tiny_dataset


def test_an_items_shard_is_blake2b_of_its_id_modulo_n() -> None:
    digest = hashlib.blake2b(b"d0", digest_size=8).digest()
    assert shard_of("d0", 7) == int.from_bytes(digest, "big") % 7
    assert [shard_of(f"item-{i}", 4) for i in range(8)] == [
        shard_of(f"item-{i}", 4) for i in range(8)
    ]


@given(
    st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=30, unique=True),
    st.lists(st.text(min_size=1, max_size=12), max_size=10),
    st.integers(1, 9),
)
def test_adding_items_moves_no_other_item(ids: list[str], added: list[str], n: int) -> None:
    before = {i: shard_of(i, n) for i in ids}
    after = {i: shard_of(i, n) for i in [*added, *ids]}
    assert all(after[i] == before[i] for i in ids)
    assert all(0 <= s < n for s in after.values())


def test_shard_specs_are_checked() -> None:
    assert Shard.parse("2/4") == Shard(2, 4)
    assert Shard.parse(" 0 / 1 ").suffix == ".shard-0-of-1"
    for bad in ("4/4", "1", "a/b", "-1/3", "0/0"):
        with pytest.raises(HarnessError, match="--shard"):
            Shard.parse(bad)


def test_the_shards_partition_the_items(tmp_path: Path) -> None:
    dataset = load_dataset(write_tiny_dataset(tmp_path / "d", n_items=12))
    parts = [Shard(i, 3).select(dataset) for i in range(3)]
    ids = [item.id for part in parts for item in part.items]
    assert sorted(ids) == sorted(item.id for item in dataset.items)
    for part in parts:  # dataset order kept, and the whole dataset kept for fitting
        assert [i.id for i in part.items] == [i.id for i in dataset.items if i in part.items]
        assert part.population == dataset.items


def test_an_empty_shard_is_refused(tmp_path: Path) -> None:
    dataset = load_dataset(write_tiny_dataset(tmp_path / "d", n_items=1))
    empty = next(i for i in range(8) if not Shard(i, 8).holds("d0"))
    with pytest.raises(HarnessError, match="holds none of the 1 item"):
        Shard(empty, 8).select(dataset)


def run(config: ExperimentConfig, workdir: Path, shard: Shard | None = None) -> RunResult:
    cache = ResponseCache(workdir / "cache")
    try:
        runner = Runner(
            config,
            cache=cache,
            results_dir=workdir / "results",
            show_progress=False,
            shard=shard,
        )
        return asyncio.run(runner.run())
    finally:
        cache.close()


def test_a_shard_runs_its_items_into_its_own_folder(tmp_path: Path) -> None:
    dataset = write_tiny_dataset(tmp_path / "d", n_items=6)
    config = ExperimentConfig(
        name="t", dataset=dataset, provider=provider_config(name="mock"), n_bootstrap=50
    )
    for index in range(2):
        result = run(config, tmp_path, Shard(index, 2))
        assert result.out_dir == tmp_path / "results" / f"t.shard-{index}-of-2"
        marker = json.loads((result.out_dir / SHARD_FILE).read_text())
        wanted = [f"d{i}" for i in range(6) if shard_of(f"d{i}", 2) == index]
        assert marker | {"items": None, "dataset_sha256": None} == {
            "format": 1,
            "shard": f"{index}/2",
            "index": index,
            "count": 2,
            "dataset_items": 6,
            "items": None,
            "dataset_sha256": None,
        }
        assert marker["items"] == wanted
        shard = load_dataset(config.dataset).subset(wanted)
        assert marker["dataset_sha256"] == shard.content_sha256(audio=config.sends_audio)
        records = list(read_records(result.out_dir / "records.jsonl"))
        assert sorted({r.item_id for r in records}) == wanted
        assert json.loads((result.out_dir / "metrics.json").read_text())["n_items"] == len(wanted)


def test_popularity_fits_on_every_item_in_a_shard(tmp_path: Path) -> None:
    dataset = write_pool_dataset(tmp_path / "pool", n_items=6, n_candidates=20)
    config = ExperimentConfig(
        name="pop",
        dataset=dataset,
        provider=provider_config(name="popularity"),
        inputs={"dialogue": "query", "music": "caption"},
        n_bootstrap=50,
    )
    whole = run(config, tmp_path / "whole")
    scores: dict[str, Any] = {
        r.item_id: r.scores for r in read_records(whole.out_dir / "records.jsonl")
    }
    for index in range(3):
        part = run(config, tmp_path / "parts", Shard(index, 3))
        for record in read_records(part.out_dir / "records.jsonl"):
            assert record.scores == scores[record.item_id]


def test_cli_shard_option(tmp_path: Path) -> None:
    dataset = write_tiny_dataset(tmp_path / "d", n_items=4)
    experiment = tmp_path / "exp.yaml"
    experiment.write_text(
        f"name: t\ndataset: {dataset}\nprovider: {{name: mock}}\nn_bootstrap: 50\n"
    )
    cli = CliRunner()
    bad = cli.invoke(app, ["run", str(experiment), "--shard", "3/3"])
    assert bad.exit_code == 2
    assert "--shard 3/3: the index must be 0..N-1" in bad.output
    args = ["--results-dir", str(tmp_path / "r"), "--cache-dir", str(tmp_path / "c")]
    ok = cli.invoke(app, ["run", str(experiment), "--shard", "1/2", "--no-progress", *args])
    assert ok.exit_code == 0, ok.output
    assert (tmp_path / "r" / "t.shard-1-of-2" / SHARD_FILE).is_file()
    assert not (tmp_path / "r" / "t").exists()


def test_a_shard_json_of_a_newer_format_is_refused_naming_it(tmp_path: Path) -> None:
    from harness.core.sharding import read_marker

    marker = {"format": 2, "index": 0, "count": 2, "dataset_items": 4, "items": ["d0"]}
    (tmp_path / SHARD_FILE).write_text(json.dumps(marker))
    with pytest.raises(HarnessError, match=r"shard\.json: format"):
        read_marker(tmp_path)
