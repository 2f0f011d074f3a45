"""`harness construct refine-set`: single-gold pools of MusicCaps captions for
`protocol: refine`, from a small CSV written here and (when present) the real one; then a
refine run over the real pools of 500 with the text-embedding scorer."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.main import app
from harness.config.experiment import ExperimentConfig
from harness.construct.refine_set import RECORDING, RefineSetConfig, build_items, run_refine_set
from harness.construct.stage1 import MUSICCAPS_COLUMNS, read_musiccaps
from harness.core.dataset import load_dataset
from harness.core.errors import HarnessError
from tests.conftest import run_config

REPO = Path(__file__).resolve().parents[3]
REALDATA = Path(os.environ.get("BGM_JUDGE_REALDATA", REPO.parent / "shared" / "realdata"))
MUSICCAPS = REALDATA / "musiccaps-public.csv"
WORDS = ["piano", "strings", "drums", "slow tempo", "calm", "sad", "guitar", "bass", "jazz"]


def write_csv(path: Path, n_rows: int = 40) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(MUSICCAPS_COLUMNS)
        for n in range(n_rows):
            aspects = [WORDS[(n + k) % len(WORDS)] for k in range(3 + n % 3)]
            if n % 4 == 0:
                aspects.append("low quality")
            caption = f"Clip {n} with {' and '.join(aspects)}." if n % 9 else ""
            writer.writerow(
                [f"yt{n:03d}", 0, 10, "/m/04rlf", repr(aspects), caption, 1, "False", "False"]
            )
    return path


def test_pools_hold_the_gold_and_the_request_names_part_of_its_aspects(tmp_path: Path) -> None:
    rows = read_musiccaps(write_csv(tmp_path / "mc.csv"))
    config = RefineSetConfig(pool=10, items=6, seed=3)
    items, clips = build_items(rows, config)
    by_id = {clip["id"]: clip for clip in clips}
    assert len(items) == 6 and len({item["relevant"][0] for item in items}) == 6
    for item in items:
        (gold,) = item["relevant"]
        assert len(item["candidates"]) == len(set(item["candidates"])) == 10
        assert gold in item["candidates"]
        aspects = by_id[gold]["aspects"]
        assert len(item["query_aspects"]) == 2 and set(item["query_aspects"]) < set(aspects)
        assert not any(RECORDING.search(a) for a in item["query_aspects"])
        assert item["query"] == f"Recommend me some music: {', '.join(item['query_aspects'])}."
    assert all(clip["caption"] and len(clip["aspects"]) >= 4 for clip in clips)
    again, _ = build_items(rows, config)
    assert again == items
    assert build_items(rows, RefineSetConfig(pool=10, items=6, seed=4))[0] != items


def test_the_command_writes_a_loadable_dataset_the_same_every_time(tmp_path: Path) -> None:
    source = write_csv(tmp_path / "mc.csv")
    runner = CliRunner()
    args = ["construct", "refine-set", "--musiccaps", str(source), "--pool", "8", "--items", "5"]
    first = runner.invoke(app, [*args, "--out", str(tmp_path / "a")])
    assert first.exit_code == 0, first.output
    assert runner.invoke(app, [*args, "--out", str(tmp_path / "b")]).exit_code == 0
    for name in ("items.jsonl", "clips.jsonl"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    dataset = load_dataset(tmp_path / "a")
    assert len(dataset.items) == 5 and all(len(i.candidates) == 8 for i in dataset.items)
    too_many = runner.invoke(app, [*args[:-1], "500", "--out", str(tmp_path / "c")])
    assert too_many.exit_code == 2 and "too few for pools of 8 and 500 items" in too_many.output
    bad = runner.invoke(app, [*args, "--query-aspects", "4", "--out", str(tmp_path / "d")])
    assert bad.exit_code == 2 and "query_aspects must be below min_aspects" in bad.output
    again = runner.invoke(app, [*args, "--out", str(tmp_path / "a")])
    assert again.exit_code == 2 and "--overwrite" in again.output


def test_too_few_clips_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="too few"):
        run_refine_set(write_csv(tmp_path / "mc.csv", 6), tmp_path / "out", RefineSetConfig())


@pytest.mark.slow
@pytest.mark.skipif(not MUSICCAPS.is_file(), reason=f"no MusicCaps CSV at {MUSICCAPS}")
def test_a_refine_run_over_real_pools_of_500(tmp_path: Path) -> None:
    report = run_refine_set(MUSICCAPS, tmp_path / "set", RefineSetConfig(pool=500, items=4, seed=0))
    assert report["n_rows"] == 5521 and report["n_items"] == 4
    config = ExperimentConfig.model_validate(
        {
            "name": "real",
            "dataset": str(tmp_path / "set"),
            "protocol": "refine",
            "provider": {"name": "text-embedding"},
            "inputs": {"dialogue": "query", "music": "caption"},
            "metrics": {"at": [1, 5, 10]},
            "n_bootstrap": 100,
        }
    )
    result, records = run_config(config, tmp_path)
    assert result.stats.errors == 0 and len(records) == 8
    metrics = json.loads((result.out_dir / "metrics.json").read_text())
    assert metrics["n_candidates"] == 500 and {"median_rank", "mean_rank"} <= set(
        metrics["metrics"]
    )
    for turn in metrics["turns"]:
        assert metrics["metrics"]["success@10"]["mean"] >= turn["metrics"]["recall@10"]["mean"]
