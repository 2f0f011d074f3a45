"""An error that quotes data quotes a bounded part of it (issue 48): a 10 MB id in a
predictions file is one short line, not 10 MB on the terminal."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from harness.cli.main import app
from harness.core.errors import DatasetError, HarnessError


def test_a_huge_id_is_shortened_in_the_error_line(tiny_dataset: Path, tmp_path: Path) -> None:
    huge = "x" * 10_000_000
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text(json.dumps({"item_id": huge, "scores": {}}) + "\n")
    result = CliRunner().invoke(
        app, ["evaluate", "--dataset", str(tiny_dataset), "--predictions", str(predictions)]
    )
    assert result.exit_code == 2, result.output[:500]
    assert "unknown item id" in result.output
    assert len(result.output) < 2_000, len(result.output)


def test_every_harness_error_is_bounded() -> None:
    text = str(DatasetError("items.jsonl", 3, "id " + "y" * 100_000 + " is odd"))
    assert (
        len(text) < 2_000 and text.startswith("items.jsonl:3: id yyy") and text.endswith("is odd")
    )
    assert str(HarnessError("short")) == "short"
