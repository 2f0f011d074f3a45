"""D19: text from data (labels, folder names, subreddits, experiment names, error messages
quoting a dataset) reaches the terminal as text: rich markup in it (`[/bold]`) prints literally
instead of raising MarkupError after the files are written, and control characters (ESC
starting colour, cursor and title sequences; BEL; CR) are shown escaped, never acted on. One
helper, `harness.core.sanitize.terminal_text`, is what every print of data goes through."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console
from typer.testing import CliRunner

from harness.cli.main import app
from harness.core.sanitize import terminal_text
from tests.conftest import write_tiny_dataset
from tests.harness.reports._runs import pointwise_records, tiny_scores, write_run

MARKUP = "[/bold]"
ESC = "\x1b]0;owned\x07\x1b[2J"
HOSTILE = f"x{MARKUP}{ESC}[red]y"
SHOWN = "x[/bold]\\x1b]0;owned\\x07\\x1b[2J[red]y"  # what the terminal shows instead


def _clean(output: str) -> str:
    assert "Traceback" not in output, output
    assert "\x1b" not in output and "\x07" not in output, repr(output)
    return output


@given(st.text())
def test_d19_terminal_text_prints_literally_and_never_raises(text: str) -> None:
    out = io.StringIO()
    Console(file=out, width=10_000, force_terminal=False).print(
        terminal_text(text), highlight=False, soft_wrap=True
    )
    printed = out.getvalue()
    assert not any(ord(c) < 32 and c not in "\n\t" for c in printed)
    assert not any(0x7F <= ord(c) <= 0x9F for c in printed)
    if text.isprintable() and text.strip():
        assert text.rstrip() in printed  # printable text (markup included) appears verbatim


@pytest.mark.slow
def test_d19_report_prints_hostile_labels_as_text(tmp_path: Path) -> None:
    dataset = write_tiny_dataset(tmp_path / "data", n_items=12, seconds=0.1)
    results = tmp_path / "results"
    write_run(results / HOSTILE, dataset, pointwise_records(tiny_scores(12)))
    write_run(results / "plain", dataset, pointwise_records(tiny_scores(12, reverse=True)))
    out = tmp_path / "report"
    result = CliRunner().invoke(app, ["report", str(results), "--out", str(out)])
    assert result.exit_code == 0, result.output
    shown = _clean(result.output)
    assert "\\x1b]0;owned\\x07\\x1b[2J[red]y" in shown  # the label (its tail) as text
    listed = CliRunner().invoke(app, ["runs", str(results)])
    assert listed.exit_code == 0, listed.output
    assert "x[/bold]" in _clean(listed.output)


def test_d19_import_prints_a_hostile_subreddit_as_text(tmp_path: Path) -> None:
    row = {
        "name": "t3_a",
        "query": "What next?",
        "combined_text": "Thread: recommend me something.",
        "source_subreddit": HOSTILE,
        "final_candidates": ["A", "B"],
        "limited_gt": ["A"],
        "valid_urls": [],
    }
    source = tmp_path / "src.jsonl"
    source.write_text(json.dumps(row) + "\n")
    result = CliRunner().invoke(
        app, ["import", "musicrs", str(source), "--out", str(tmp_path / "o")]
    )
    assert result.exit_code == 0, result.output
    assert SHOWN in _clean(result.output)


def test_d19_a_run_error_quoting_the_dataset_prints_as_text(tmp_path: Path) -> None:
    dataset = write_tiny_dataset(tmp_path / "data", n_items=2, seconds=0.1)
    provider = {"name": "mock"}
    items = (dataset / "items.jsonl").read_text().splitlines()
    bad = json.loads(items[0])
    bad["candidates"][0] = bad["human_ranking"][-1] = HOSTILE  # a clip that is not there
    (dataset / "items.jsonl").write_text("\n".join([json.dumps(bad), *items[1:]]) + "\n")
    experiment = tmp_path / "e.yaml"
    experiment.write_text(
        yaml.safe_dump(
            {"name": "run", "dataset": str(dataset), "provider": provider, "n_bootstrap": 20}
        )
    )
    result = CliRunner().invoke(
        app, ["run", str(experiment), "--results-dir", str(tmp_path / "r"), "--no-progress"]
    )
    assert result.exit_code == 2, result.output
    assert "x[/bold]" in _clean(result.output)
