"""`harness compare --sequential` and `harness plan` on predictions files: the decision,
compare.json's fields, the figure, the terminal line, and one-line errors for bad input."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from harness.cli.main import app
from harness.core.records import Record

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
        (["--budget-usd", "5"], "--budget-usd needs --sequential"),
        (["--sequential", "--margin", "inf"], "--margin must be positive and finite"),
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
    assert "sequential: expected (mean of 20 simulated)" in output
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


def _subset(source: Path, path: Path, keep: int) -> Path:
    """`source`'s predictions of its first `keep` items only (a shard, or a side that did not
    answer the rest)."""
    lines = source.read_text().splitlines()[:keep]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_items_one_side_did_not_answer_are_left_out_and_counted(
    pair: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """Failing first: B (as good as A) answered 20% of the items; the others were counted at
    chance (Hit@1 0.25 against A's 0.5) and "A better" came out, with no word about it."""
    data, _, _ = pair
    a = _predictions(tmp_path / "same_a.jsonl", 0.5, 7)
    b = _subset(_predictions(tmp_path / "same_b.jsonl", 0.5, 8), tmp_path / "b20.jsonl", N // 5)
    out = tmp_path / "out"
    code, output = _invoke(
        "compare", str(a), str(b), "--sequential", "--dataset", str(data), "--out", str(out)
    )
    assert code == 0, output
    assert "warning: b20 answered 120 of the 600 items; same_a answered all 600" in output
    assert "compared on the 120 items both answered" in output
    report = json.loads((out / "compare.json").read_text())
    assert report["decision"] != "A better"
    assert report["n_items_total"] == 120 and set(report["items"]) <= {f"q{i}" for i in range(120)}
    assert report["coverage"] == {
        "missing": "exclude",
        "items": 600,
        "answered_by_both": 120,
        "answered_by_a_only": 480,
        "answered_by_b_only": 0,
        "answered_by_neither": 0,
        "in_one_dataset_only": 0,
        "compared": 120,
    }
    # the old reading, asked for by name: every unanswered item at chance level
    code, output = _invoke(
        "compare", str(a), str(b), "--sequential", "--dataset", str(data), "--out", str(out),
        "--missing", "worst",
    )  # fmt: skip
    assert code == 0, output
    assert "counted at chance level" in output
    report = json.loads((out / "compare.json").read_text())
    assert report["decision"] == "A better" and report["coverage"]["compared"] == 600
    code, output = _invoke(
        "compare", str(a), str(b), "--sequential", "--dataset", str(data), "--missing", "refuse"
    )
    assert code == 2 and "Traceback" not in output
    assert (
        "b20 has no answer for 480 of the 600 items (q120, q121, q122, q123, q124, ...)" in output
    )


def test_a_full_run_against_its_own_shard_compares_the_shard_items(
    pair: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """Failing first: a side missing half its items scored them as ties, and B equal to A
    came out "+0.067"."""
    data, a, _ = pair
    half = _subset(a, tmp_path / "half.jsonl", N // 2)
    out = tmp_path / "out"
    code, output = _invoke(
        "compare", str(a), str(half), "--sequential", "--dataset", str(data), "--out", str(out),
        "--finite", "--batch-size", "300",
    )  # fmt: skip
    assert code == 0, output
    report = json.loads((out / "compare.json").read_text())
    assert report["difference"] == 0.0 and report["n_items"] == N // 2
    assert report["coverage"]["answered_by_a_only"] == N // 2


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda item: item | {"relevant": ["s1"]}, "item q5: relevant differs"),
        (lambda item: item | {"query": "something else"}, "item q5: query differs"),
    ],
)
def test_datasets_that_differ_in_content_are_refused(
    pair: tuple[Path, Path, Path], tmp_path: Path, change: Any, message: str
) -> None:
    """Failing first: only the ids were compared; a run of a changed dataset was compared
    as if it were of the same one."""
    from tests.harness.reports._runs import write_run

    data, a, b = pair
    other = tmp_path / "other"
    shutil.copytree(data, other)
    items = [json.loads(line) for line in (other / "items.jsonl").read_text().splitlines()]
    items[5] = change(items[5])
    (other / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    run_a = write_run(tmp_path / "run_a", data, _records(a))
    run_b = write_run(tmp_path / "run_b", other, _records(b))
    code, output = _invoke("compare", str(run_a), str(run_b), "--sequential")
    assert code == 2 and "Traceback" not in output, output
    assert message in output and str(other) in output


def _records(predictions: Path) -> list[Record]:
    """One joint record per item, scoring the predictions file's ranking."""
    out = []
    for line in predictions.read_text().splitlines():
        row = json.loads(line)
        n = len(row["ranking"])
        scores = {cid: float(n - rank) for rank, cid in enumerate(row["ranking"])}
        out.append(Record(item_id=row["item_id"], candidates=row["ranking"], scores=scores))
    return out


def test_without_sequential_a_fixed_sample_test_on_every_item(
    pair: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """Failing first: compare refused to run without --sequential (issue 47's stumble)."""
    data, a, b = pair
    out = tmp_path / "out"
    code, output = _invoke("compare", str(a), str(b), "--dataset", str(data), "--out", str(out))
    assert code == 0, output
    assert output.startswith("B better: hit@1 B - A = +") and "paired test p = " in output
    report = json.loads((out / "compare.json").read_text())
    assert report["design"] == "fixed" and report["n_items"] == N
    assert report["test"]["p_value"] < 0.05 and report["test"]["n_items"] == N
    assert report["reason"] == "p < alpha" and not (out / "compare.png").exists()
    code, output = _invoke(
        "compare", str(a), str(a), "--dataset", str(data), "--out", str(out), "--margin", "0.05",
        "--max-items", "200",
    )  # fmt: skip
    assert code == 0, output
    report = json.loads((out / "compare.json").read_text())
    assert report["decision"] == "equivalent" and report["n_items"] == 200
    assert report["reason"] == "the 90% CI lies inside the margin"


def test_an_item_whose_calls_failed_is_not_answered(tmp_path: Path) -> None:
    from tests.conftest import write_tiny_dataset
    from tests.harness.reports._runs import pointwise_records, tiny_scores, write_run

    data = write_tiny_dataset(tmp_path / "data", n_items=12, seconds=0.1)
    records = pointwise_records(tiny_scores(12))
    failed = [
        r.model_copy(update={"scores": dict.fromkeys(r.scores), "error": "rate_limit: 429"})
        if r.item_id in ("d0", "d1")
        else r
        for r in records
    ]
    a = write_run(tmp_path / "a", data, records)
    b = write_run(tmp_path / "b", data, failed)
    out = tmp_path / "out"
    code, output = _invoke("compare", str(a), str(b), "--out", str(out))
    assert code == 0, output
    report = json.loads((out / "compare.json").read_text())
    assert report["coverage"]["answered_by_a_only"] == 2 and report["n_items"] == 10
    assert report["difference"] == 0.0


def _plan(tmp_path: Path, effect: str, b_rate: float) -> str:
    data = _dataset(tmp_path / "pilot", 100)
    a = _predictions(tmp_path / "pa.jsonl", 0.3, 3, 100)
    b = _predictions(tmp_path / "pb.jsonl", b_rate, 4, 100)
    code, output = _invoke(
        "plan", str(a), str(b), "--dataset", str(data), "--effect", effect, "--runs", "20",
        "--max-items", "4000",
    )  # fmt: skip
    assert code == 0, output
    return output


def test_plan_items_column_holds_only_item_counts(tmp_path: Path) -> None:
    """Failing first (issue 47, #13): the pilot's minimum detectable difference (0.2...)
    was printed under the "items" column."""
    output = _plan(tmp_path, "0.1", 0.35)
    rows = [line.split("│") for line in output.splitlines() if line.startswith("│")]
    assert rows and all(re.fullmatch(r"[\d,]+", row[-2].strip()) for row in rows), output
    assert re.search(r"minimum detectable difference on the pilot \(80% power\): 0\.\d+", output)


def test_plan_says_which_design_is_the_better_buy(tmp_path: Path) -> None:
    """Failing first: plan printed both designs' items and left the choice to the reader;
    at a small effect the sequential comparison rarely decides within the items available,
    where a fixed-size test of fewer items has 80% power."""
    from harness.cli.compare import _better_buy

    small = _plan(tmp_path / "small", "0.05", 0.35)
    assert "better buy at this effect: a fixed-size comparison of 1,364 items" in small
    assert "harness compare A.yaml B.yaml --max-items 1364" in small
    assert "within 4,000 items in only 75% of the simulated runs" in small
    assert "--finite" in small and "items beyond them" in small
    large = _plan(tmp_path / "large", "0.4", 0.7)
    assert "a fixed-size comparison of 21 items" in large and "expects 2.6x as many" in large
    assert "the sequential comparison (about 80 items" in _better_buy(100, 80.0, 0.9, 4000)


def test_items_only_one_dataset_holds_are_counted_or_refused(
    pair: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """Failing first: items of A's dataset that B's did not hold (B's a subset of it) were
    dropped without a word."""
    from tests.harness.reports._runs import write_run

    data, a, b = pair
    half = tmp_path / "half"
    shutil.copytree(data, half)
    lines = (half / "items.jsonl").read_text().splitlines()[: N // 2]
    (half / "items.jsonl").write_text("\n".join(lines) + "\n")
    run_a = write_run(tmp_path / "run_a", data, _records(a))
    run_b = write_run(tmp_path / "run_b", half, _records(_subset(b, tmp_path / "b.half", N // 2)))
    out = tmp_path / "out"
    code, output = _invoke("compare", str(run_a), str(run_b), "--out", str(out))
    assert code == 0, output
    assert "300 item(s) only one of the datasets holds are left out" in output
    report = json.loads((out / "compare.json").read_text())
    assert report["coverage"]["in_one_dataset_only"] == 300 and report["n_items"] == 300
    code, output = _invoke("compare", str(run_a), str(run_b), "--missing", "refuse")
    assert code == 2 and "300 item(s) are in only one of the two datasets" in output
