"""D21: labels (and any other text) that a spreadsheet would run as a formula (`=`, `+`, `-`,
`@`, tab, CR) are written to comparison.csv and agreement.csv as text, through the one CSV
writer; numbers, negative ones included, stay numbers."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from harness.cli.main import app
from harness.core.sanitize import csv_cell
from tests.conftest import write_tiny_dataset
from tests.harness.reports._runs import tiny_scores

HOSTILE = ['=HYPERLINK("x")', "+1+2", "-2+3", "@SUM(A1)"]


def _csv(path: Path) -> list[list[str]]:
    with path.open(newline="") as handle:
        return list(csv.reader(handle))


@pytest.mark.slow
def test_d21_formula_labels_are_text_in_every_csv(tmp_path: Path) -> None:
    dataset = write_tiny_dataset(tmp_path / "data", n_items=12, seconds=0.1)
    folders = []
    for n, label in enumerate(HOSTILE):
        folder = tmp_path / label
        folder.mkdir()
        rows = tiny_scores(12, reverse=bool(n % 2))
        (folder / "predictions.jsonl").write_text(
            "".join(json.dumps({"item_id": i, "scores": s}) + "\n" for i, s in rows.items())
        )
        folders.append(str(folder))
    out = tmp_path / "report"
    result = CliRunner().invoke(
        app, ["report", *folders, "--dataset", str(dataset), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    for name in ("comparison.csv", "agreement.csv"):
        cells = [cell for row in _csv(out / name) for cell in row]
        assert not [
            c for c in cells if c[:1] in {"=", "+", "@"} or (c[:1] == "-" and not _number(c))
        ]
        for label in HOSTILE:
            assert "'" + label in cells, (name, label)
    # numbers are numbers: a negative correlation in agreement.csv is not quoted
    agreement = [cell for row in _csv(out / "agreement.csv") for cell in row]
    assert any(_number(c) and float(c) < 0 for c in agreement)


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


@given(st.text(max_size=12))
def test_d21_no_cell_starts_a_formula(text: str) -> None:
    cell = csv_cell(text)
    assert isinstance(cell, str)
    assert not cell.startswith(("=", "+", "@", "\t", "\r")) or _number(cell)
    assert not cell.startswith("-") or _number(cell)
    assert cell in (text, "'" + text) or "\ufffd" in cell  # only a lone surrogate is replaced
