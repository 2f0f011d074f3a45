"""`harness compare --sequential` and `harness plan` on predictions files: the decision,
compare.json's fields, the figure, the terminal line, and one-line errors for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from harness.cli.main import app

N = 600


def _dataset(root: Path, n: int = N) -> Path:
    root.mkdir(parents=True)
    clips = [{"id": f"s{j}", "title": f"Song {j}"} for j in range(4)]
    items = [
        {
            "id": f"q{i}",
            "query": f"music for moment {i}",
            "candidates": ["s0", "s1", "s2", "s3"],
            "relevant": ["s0"],
        }
        for i in range(n)
    ]
    (root / "clips.jsonl").write_text("".join(json.dumps(c) + "\n" for c in clips))
    (root / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    return root


def _predictions(path: Path, hit_rate: float, seed: int, n: int = N) -> Path:
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(n):
        top = "s0" if rng.random() < hit_rate else f"s{rng.integers(1, 4)}"
        ranking = [top, *(c for c in ("s0", "s1", "s2", "s3") if c != top)]
        lines.append(json.dumps({"item_id": f"q{i}", "ranking": ranking}))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path, Path]:
    data = _dataset(tmp_path / "data")
    a = _predictions(tmp_path / "a.jsonl", 0.3, 1)
    b = _predictions(tmp_path / "b.jsonl", 0.6, 2)
    return data, a, b


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def test_b_better_on_predictions(pair: tuple[Path, Path, Path], tmp_path: Path) -> None:
    data, a, b = pair
    out = tmp_path / "out"
    code, output = _invoke(
        "compare", str(a), str(b), "--sequential", "--dataset", str(data), "--out", str(out)
    )
    assert code == 0, output
    assert output.startswith("B better: hit@1 B - A = +")
    report = json.loads((out / "compare.json").read_text())
    assert report["decision"] == "B better" and report["reason"] == "the sequence excludes 0"
    assert report["n_items_total"] == N and report["n_items"] < N
    assert report["n_items"] % 50 == 0 and len(report["items"]) == report["n_items"]
    lo, hi = report["cs"]
    assert 0 < lo < report["difference"] < hi
    assert [step["n"] for step in report["path"]] == list(range(50, report["n_items"] + 1, 50))
    assert report["path"][-1]["lo"] == lo
    assert "NOT valid" in report["bootstrap_reference"]["note"]
    assert report["calls"] is None  # predictions: no calls
    assert (out / "compare.png").read_bytes()[:4] == b"\x89PNG"


def test_equal_configurations_with_a_margin_are_equivalent(
    pair: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    data, a, _ = pair
    out = tmp_path / "out"
    code, output = _invoke(
        "compare", str(a), str(a), "--sequential", "--dataset", str(data), "--out", str(out),
        "--margin", "0.2", "--metric", "mrr",
    )  # fmt: skip
    assert code == 0, output
    report = json.loads((out / "compare.json").read_text())
    assert report["decision"] == "equivalent" and report["metric"] == "mrr"
    assert -0.2 < report["cs"][0] <= 0 <= report["cs"][1] < 0.2


def test_max_items_leaves_it_undecided(pair: tuple[Path, Path, Path], tmp_path: Path) -> None:
    data, a, _ = pair
    out = tmp_path / "out"
    code, output = _invoke(
        "compare", str(a), str(a), "--sequential", "--dataset", str(data), "--out", str(out),
        "--max-items", "120", "--batch-size", "40", "--finite",
    )  # fmt: skip
    assert code == 0, output
    report = json.loads((out / "compare.json").read_text())
    assert report["decision"] == "undecided" and report["n_items"] == 120
    assert report["reason"] == "--max-items reached"
    assert report["target"].startswith("mean over these items")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "compare needs --sequential"),
        (["--sequential", "--metric", "median_rank"], "--metric 'median_rank' is not a bounded"),
        (["--sequential", "--alpha", "1.5"], "--alpha must lie strictly between 0 and 1"),
        (["--sequential", "--margin", "-1"], "--margin must be positive"),
        (["--sequential", "--batch-size", "0"], "--batch-size must be at least 1"),
    ],
)
def test_bad_options_are_one_line(
    pair: tuple[Path, Path, Path], extra: list[str], message: str
) -> None:
    data, a, b = pair
    code, output = _invoke("compare", str(a), str(b), "--dataset", str(data), *extra)
    assert code == 2
    assert message in output and "Traceback" not in output
    assert len(output.strip().splitlines()) == 1


def test_predictions_need_a_dataset(pair: tuple[Path, Path, Path]) -> None:
    _, a, b = pair
    code, output = _invoke("compare", str(a), str(b), "--sequential")
    assert code == 2 and "needs --dataset" in output


def test_plan_prints_fixed_and_sequential_items(
    pair: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    data = _dataset(tmp_path / "pilot", 100)
    a = _predictions(tmp_path / "pa.jsonl", 0.3, 3, 100)
    b = _predictions(tmp_path / "pb.jsonl", 0.35, 4, 100)
    code, output = _invoke(
        "plan", str(a), str(b), "--dataset", str(data), "--effect", "0.1", "--runs", "20"
    )
    assert code == 0, output
    assert "fixed-sample paired test, 80% power" in output
    assert "sequential: expected items" in output
    code, output = _invoke("plan", str(a), str(b), "--dataset", str(data), "--effect", "5")
    assert code == 2 and "outside the pilot's paired differences" in output


def test_finished_runs_count_the_calls_of_the_visited_items(tmp_path: Path) -> None:
    from tests.conftest import write_tiny_dataset
    from tests.harness.reports._runs import pointwise_records, tiny_scores, write_run

    data = write_tiny_dataset(tmp_path / "data", n_items=12, seconds=0.1)
    good = write_run(tmp_path / "good", data, pointwise_records(tiny_scores(12)))
    bad = write_run(tmp_path / "bad", data, pointwise_records(tiny_scores(12, reverse=True)))
    out = tmp_path / "out"
    code, output = _invoke(
        "compare", str(bad), str(good), "--sequential", "--batch-size", "5", "--out", str(out)
    )
    assert code == 0, output
    report = json.loads((out / "compare.json").read_text())
    # B wins every item: the bet against "no difference" grows at most 1.5x per item and
    # (halved by the hedge) passes 1/alpha = 20 at the 10th: 0.5 * 1.5**10 = 28.8
    assert report["decision"] == "B better" and report["n_items"] == 10
    assert report["difference"] == 1.0
    assert report["calls"] == 2 * 10 * 4 and report["calls_full"] == 2 * 12 * 4
