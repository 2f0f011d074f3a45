"""`harness evaluate` writes, byte for byte, the metrics.json files in data/golden_metrics/,
which were made by the code before the pool-evaluation speed work (issue 26, goal 5) with
data/make_golden_metrics.py: faster reading, metrics and bootstrap must not move a digit.

The pools are written here from Python's `random` (its stream is fixed for a seed): single
gold with ties on a coarse grid (as the evaluate_pool bench), rows of unequal length with
nulls, absent candidates and absent items (both missing policies, cut-offs), several gold,
graded relevance of many levels with groups, repeats and ranking lines, and human rankings."""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.core.dataset import load_dataset
from harness.core.predictions import read_predictions
from harness.scoring.evaluation import evaluate_predictions

GOLDEN = Path(__file__).parent / "data" / "golden_metrics"
runner = CliRunner()

Line = dict[str, Any]


def _write(folder: Path, items: list[Line], predictions: list[Line], n_clips: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    clips = "".join(
        json.dumps({"id": f"s{k}", "title": f"Song {k}"}) + "\n" for k in range(n_clips)
    )
    (folder / "clips.jsonl").write_text(clips)
    (folder / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    (folder / "predictions.jsonl").write_text("".join(json.dumps(p) + "\n" for p in predictions))
    return folder


def _item(i: int, candidates: list[str], **judgement: Any) -> Line:
    """Item `q{i}` of a pool: its candidates and what judges them (gold, relevance, ...)."""
    return {"id": f"q{i}", "query": "q", "candidates": candidates, **judgement}


def single_gold_ties(folder: Path) -> Path:
    """300 items x 60 candidates, one gold, scores on a 0.05 grid: every line in candidate
    order, as `harness run` writes them."""
    rng = random.Random(1)
    items, predictions = [], []
    for i in range(300):
        candidates = [f"s{k}" for k in rng.sample(range(400), 60)]
        items.append(_item(i, candidates, relevant=[rng.choice(candidates)]))
        scores = {c: round(rng.random() * 20) / 20 for c in candidates}
        predictions.append({"item_id": f"q{i}", "scores": scores})
    return _write(folder, items, predictions, 400)


def ragged_missing(folder: Path) -> Path:
    """Items of 2 to 70 candidates, one gold; lines in shuffled key order, with nulls,
    integers, absent candidates, and items without a line."""
    rng = random.Random(2)
    items, predictions = [], []
    for i in range(250):
        candidates = [f"s{k}" for k in rng.sample(range(300), rng.randint(2, 70))]
        items.append(_item(i, candidates, relevant=[rng.choice(candidates)]))
        if rng.random() < 0.05:
            continue
        scores: dict[str, float | int | None] = {}
        for c in rng.sample(candidates, len(candidates)):
            roll = rng.random()
            if roll < 0.05:
                continue
            scores[c] = None if roll < 0.1 else rng.randint(0, 5) if roll < 0.3 else rng.random()
        predictions.append({"item_id": f"q{i}", "scores": scores})
    return _write(folder, items, predictions, 300)


def several_gold(folder: Path) -> Path:
    """Two to five gold among 40 candidates, scores on a coarse grid (gold tied together)."""
    rng = random.Random(3)
    items, predictions = [], []
    for i in range(200):
        candidates = [f"s{k}" for k in rng.sample(range(200), 40)]
        items.append(_item(i, candidates, relevant=rng.sample(candidates, rng.randint(2, 5))))
        predictions.append(
            {"item_id": f"q{i}", "scores": {c: float(rng.randint(0, 6)) for c in candidates}}
        )
    return _write(folder, items, predictions, 200)


def graded_groups_repeats(folder: Path) -> Path:
    """Graded relevance (some items of more than eight levels), groups, two repeats, some
    lines given as rankings."""
    rng = random.Random(4)
    items, predictions = [], []
    for i in range(160):
        candidates = [f"s{k}" for k in rng.sample(range(150), rng.choice([20, 30]))]
        levels = 12 if i % 3 == 0 else 3
        graded = {c: float(rng.randint(0, levels)) for c in rng.sample(candidates, 15)}
        items.append(_item(i, candidates, group=rng.choice(["a", "b", "c"]), relevance=graded))
        for repeat in (0, 1):
            line: Line = {"item_id": f"q{i}", "repeat": repeat}
            if rng.random() < 0.2:
                line["ranking"] = rng.sample(candidates, rng.randint(0, len(candidates)))
            else:
                line["scores"] = {c: round(rng.random(), 1) for c in candidates}
            predictions.append(line)
    return _write(folder, items, predictions, 150)


def human_rankings(folder: Path) -> Path:
    """Human rankings of 12 candidates (every candidate its own level)."""
    rng = random.Random(5)
    items, predictions = [], []
    for i in range(150):
        candidates = [f"s{k}" for k in rng.sample(range(100), 12)]
        items.append(_item(i, candidates, human_ranking=rng.sample(candidates, 12)))
        predictions.append(
            {"item_id": f"q{i}", "scores": {c: float(rng.randint(0, 8)) for c in candidates}}
        )
    return _write(folder, items, predictions, 100)


CASES: dict[str, tuple[Callable[[Path], Path], list[str]]] = {
    "single_gold_ties": (single_gold_ties, []),
    "ragged_worst": (ragged_missing, ["--at", "1,5,10,100"]),
    "ragged_exclude": (ragged_missing, ["--at", "3", "--missing", "exclude"]),
    "several_gold": (several_gold, ["--at", "1,2,10"]),
    "graded_groups_repeats": (graded_groups_repeats, ["--at", "5", "--n-bootstrap", "300"]),
    "human_rankings": (human_rankings, ["--n-bootstrap", "200", "--seed", "7"]),
}


def evaluate_case(name: str, work: Path) -> bytes:
    """The metrics.json `harness evaluate` writes for case `name`."""
    write, options = CASES[name]
    folder = write(work / name)
    out = work / f"{name}.json"
    args = [
        "evaluate",
        "--dataset",
        str(folder),
        "--predictions",
        str(folder / "predictions.jsonl"),
        "--out",
        str(out),
        *options,
    ]
    done = runner.invoke(app, args)
    assert done.exit_code == 0, done.output
    return out.read_bytes()


def per_item_digests(name: str, work: Path) -> dict[str, str]:
    """sha256 of every per-item metric array (float64 bytes, before metrics.json rounds the
    means to six places), overall and per group."""
    write, options = CASES[name]
    folder = write(work / name)
    items = load_dataset(folder, check_audio=False).items
    predictions = read_predictions(folder / "predictions.jsonl", items)
    at = (
        [int(k) for k in options[options.index("--at") + 1].split(",")] if "--at" in options else []
    )
    missing = "exclude" if "exclude" in options else "worst"
    result = evaluate_predictions(items, predictions, at=at, missing=missing, n_bootstrap=10)
    parts = {"": result.aggregate, **{f"{g}/": a for g, a in result.groups.items()}}
    return {
        f"{prefix}{metric}": hashlib.sha256(values.tobytes()).hexdigest()
        for prefix, agg in parts.items()
        for metric, values in agg.per_item.items()
    }


# Keys metrics.json gained after the golden files were made; every other key and figure must
# stay byte for byte (a new key is allowed, a changed or missing one is not).
ADDED_KEYS = {"tie_rate_ranking"}  # issue 49


def _without_added(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_added(v) for k, v in value.items() if k not in ADDED_KEYS}
    return value


@pytest.mark.parametrize("name", sorted(CASES))
def test_metrics_json_is_byte_identical_to_the_golden_file(name: str, tmp_path: Path) -> None:
    golden = (GOLDEN / f"{name}.json").read_bytes()
    # the golden bytes are this serialisation of themselves, so comparing in it compares bytes
    assert json.dumps(json.loads(golden), indent=2).encode() + b"\n" == golden
    fresh = _without_added(json.loads(evaluate_case(name, tmp_path)))
    assert json.dumps(fresh, indent=2).encode() + b"\n" == golden


@pytest.mark.parametrize("name", sorted(CASES))
def test_per_item_values_are_bit_identical_to_the_golden_ones(name: str, tmp_path: Path) -> None:
    golden = json.loads((GOLDEN / "per_item_sha256.json").read_text())[name]
    assert per_item_digests(name, tmp_path) == golden
