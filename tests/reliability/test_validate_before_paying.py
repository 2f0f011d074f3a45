"""Everything that can be checked is checked before the first paid call: an item the metrics
step cannot evaluate (no human ranking, as a stage-3 dataset before annotation), a negative
seed, an impossible bootstrap count. The run stops with one line and exit 2, having sent
nothing (not even the summaries it would have generated)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from harness.cli.main import app
from harness.fake_api import FakeServer
from tests.reliability.conftest import FAST, MakeDataset, fast_settings


def _unranked(dataset: Path, item_id: str, drop_summaries: bool = False) -> None:
    items = [json.loads(line) for line in (dataset / "items.jsonl").read_text().splitlines()]
    for item in items:
        if item["id"] == item_id:
            del item["human_ranking"]
        if drop_summaries:
            item.pop("summary", None)
    (dataset / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))


def _run(tmp_path: Path, dataset: Path, server: FakeServer, **settings: Any) -> Any:
    provider = {"name": "openai-compatible", "model": "fake", **FAST}
    provider["base_url"] = server.openai_base_url
    config = {"name": "paid", "dataset": str(dataset), "provider": provider, **settings}
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(config))
    return CliRunner().invoke(
        app,
        ["run", str(tmp_path / "exp.yaml"), "--results-dir", str(tmp_path / "results"),
         "--cache-dir", str(tmp_path / "cache"), "--no-progress"],
    )  # fmt: skip


CASES: dict[str, tuple[dict[str, Any], bool, str]] = {
    "item_without_ranking": ({}, False, "d2"),
    "item_without_ranking_and_summaries_to_make": (
        {"inputs": {"dialogue": "summary"}},
        True,
        "d2",
    ),
    "negative_seed": ({"seed": -1}, False, "seed"),
    "bootstrap_too_large": ({"n_bootstrap": 10**9}, False, "n_bootstrap"),
}


@pytest.mark.parametrize("case", CASES)
def test_nothing_is_sent_for_a_run_whose_metrics_would_fail(
    case: str, make_dataset: MakeDataset, tmp_path: Path
) -> None:
    settings, drop_summaries, expected = CASES[case]
    dataset = make_dataset(n_items=4)
    if expected == "d2":
        _unranked(dataset, "d2", drop_summaries)
    with FakeServer(fast_settings()) as server:
        result = _run(tmp_path, dataset, server, **settings)
        sent = server.stats()["requests"]
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert expected in lines[0]
    assert sent == 0
    assert "Traceback" not in result.output


def test_evaluate_refuses_a_negative_seed(make_dataset: MakeDataset, tmp_path: Path) -> None:
    dataset = make_dataset(n_items=2)
    predictions = tmp_path / "p.jsonl"
    predictions.write_text('{"item_id": "d0", "scores": {"c0_0": 1.0}}\n')
    result = CliRunner().invoke(
        app, ["evaluate", "--dataset", str(dataset), "--predictions", str(predictions),
              "--seed", "-1"],
    )  # fmt: skip
    assert result.exit_code == 2 and "--seed" in result.stderr, result.output
    assert "Traceback" not in result.output
