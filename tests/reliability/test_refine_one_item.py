"""D22: one item's user-simulator reply of 1 MB makes that item's turn-2 prompt break the
template sandbox's size bound. That is the item's failure (its turn-2 record carries the
error), not a run-wide template error: the other items are refined, the run ends with exit
code 1 (incomplete, like any failed call), and a re-run does the same instead of exiting 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from harness.cli.main import app
from tests.harness.protocols.test_refine import write_refine_dataset
from tests.reliability.conftest import read_jsonl

HUGE = json.dumps({"feedback": "more piano please " * 60_000})  # about 1 MB
FINE = json.dumps({"feedback": "more piano please"})
RANKING = json.dumps({"ranking": ["Clip 1", "Clip 2", "Clip 3"]})


@pytest.mark.slow
def test_d22_a_huge_simulator_reply_fails_that_items_turn_2_only(tmp_path: Path) -> None:
    dataset = write_refine_dataset(tmp_path / "pool", n_items=3, pool=10)
    experiment = tmp_path / "e.yaml"
    experiment.write_text(
        yaml.safe_dump(
            {
                "name": "refine",
                "dataset": str(dataset),
                "protocol": "refine",
                "prompt": "listwise",
                "provider": {"name": "mock", "answers": {"*": RANKING}},
                "inputs": {"dialogue": "query", "music": "caption"},
                "refine": {"feedback": "simulator"},
                # the first reply is huge, the others are fine (one simulator call at a time)
                "user_simulator": {
                    "name": "mock",
                    "answers": {"*": [HUGE, FINE]},
                    "max_concurrency": 1,
                    "reask": 0,
                },
                "n_bootstrap": 20,
            }
        )
    )
    args = ["run", str(experiment), "--results-dir", str(tmp_path / "r")]
    for _ in range(2):  # the run, then a re-run from the cache
        result = CliRunner().invoke(
            app, [*args, "--cache-dir", str(tmp_path / "c"), "--no-progress"]
        )
        assert "Traceback" not in result.output, result.output
        assert result.exit_code == 1, result.output
        records = read_jsonl(tmp_path / "r" / "refine" / "records.jsonl")
        second = [r for r in records if r["extra"]["turn"] == 2]
        failed = [r for r in second if r.get("error")]
        assert len(second) == 3 and len(failed) == 1, second
        assert failed[0]["error"].startswith("turn2_prompt: ")
        assert "longer than" in failed[0]["error"]
        assert all(
            r["scores"] and None not in r["scores"].values() for r in second if r not in failed
        )
