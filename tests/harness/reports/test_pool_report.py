"""Reports of pool runs (MusiCRS-style): the @K columns and the per-group breakdown in a
run's report.md, a sweep's comparison.md and `harness report`'s comparison files."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

import harness
from harness.cli.main import app
from tests.conftest import write_pool_dataset
from tests.harness.reports.test_html import report_data


def test_at_k_columns_and_groups_in_every_report(tmp_path: Path) -> None:
    pool = write_pool_dataset(tmp_path / "pool", 6, 30)
    experiment = {
        "name": "pools",
        "dataset": str(pool),
        "providers": [{"name": "popularity"}, {"name": "random", "seed": 1}],
        "inputs": [{"dialogue": "query", "music": "caption"}],
        "metrics": {"at": [5, 20], "merge_groups": {"left": "both", "right": "both"}},
        "n_bootstrap": 20,
    }
    path = tmp_path / "pools.yaml"
    path.write_text(yaml.safe_dump(experiment))
    harness.run(
        path, results_dir=tmp_path / "results", cache_dir=tmp_path / "cache", show_progress=False
    )
    sweep = tmp_path / "results" / "pools"
    own = (sweep / "popularity_group-frequency_query_caption" / "report.md").read_text()
    assert "| R@5 | R@20 | nDCG@5 | nDCG@20 |" in own and "## Per group" in own
    assert "| both |" in own
    made = (sweep / "comparison.md").read_text()
    assert "R@20" in made and "| popularity_group-frequency_query_caption / both |" in made

    done = CliRunner().invoke(app, ["report", str(sweep)])
    assert done.exit_code == 0, done.output
    compared = (sweep / "comparison.md").read_text()
    assert "nDCG@20" in compared and "## Per group" in compared
    assert "| random / both |" in compared  # runs by their labels
    with (sweep / "comparison.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert {"recall@20_mean", "precision@5_mean", "hit@20_ci_low"} <= set(rows[0])
    metrics = json.loads(
        (sweep / "popularity_group-frequency_query_caption" / "metrics.json").read_text()
    )
    assert metrics["groups"]["both"]["n_items"] == 6


def test_the_dialogue_browser_shows_the_gold_items_first_in_compact_cells(tmp_path: Path) -> None:
    """Pool items have no human rank: the browser marks their gold candidates and puts them
    first, and each run's cell is a compact [score, top] pair (pages of 477 x 100 x runs)."""
    pool = write_pool_dataset(tmp_path / "pool", 3, 30)
    experiment = {
        "name": "pools",
        "dataset": str(pool),
        "provider": {"name": "random", "seed": 1},
        "inputs": {"dialogue": "query", "music": "caption"},
        "n_bootstrap": 20,
    }
    path = tmp_path / "pools.yaml"
    path.write_text(yaml.safe_dump(experiment))
    harness.run(path, results_dir=tmp_path / "r", cache_dir=tmp_path / "cache", show_progress=False)
    out = tmp_path / "rep"
    done = CliRunner().invoke(app, ["report", str(tmp_path / "r" / "pools"), "--out", str(out)])
    assert done.exit_code == 0, done.output
    html = (out / "report.html").read_text()
    data = report_data(html)
    items = {json.loads(line)["id"]: json.loads(line) for line in (pool / "items.jsonl").open()}
    for shown in data["items"]:
        gold = items[shown["id"]]["relevant"]
        first = [c["id"] for c in shown["candidates"][: len(gold)]]
        assert sorted(first) == sorted(gold)
        assert all(c.get("relevance") == 1 for c in shown["candidates"][: len(gold)])
        assert all("relevance" not in c for c in shown["candidates"][len(gold) :])
        for candidate in shown["candidates"]:
            ((score, top),) = candidate["cells"]
            assert isinstance(score, str) and top in (0, 1)
