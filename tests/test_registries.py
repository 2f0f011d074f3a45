"""A metric and a protocol added through their registries alone (`register_metric`,
`register_protocol`; nothing else of the harness edited) reach every output: metrics.json,
the run's report.md, the sweep's comparison.md, the terminal table, `harness report`'s
comparison.md and report.html, and `harness compare --metric`."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.calls.answerer import Answerer
from harness.cli.main import app
from harness.config.protocols import PROTOCOLS, Protocol, register_protocol
from harness.core.dataset import Dataset
from harness.core.records import Record
from harness.protocols.plans import Call, ScorerCalls
from harness.reports.protocol_tables import Section
from harness.scoring import registry
from harness.scoring.ranking import RankedBlock
from harness.scoring.sorted_block import FloatArray
from tests.conftest import write_tiny_dataset

pytestmark = pytest.mark.slow
runner = CliRunner()


class EchoCalls(ScorerCalls):
    """The throwaway protocol's plan: a scorer's calls, each record marked as echoed."""

    async def record(self, call: Call, answerer: Answerer) -> Record:
        record = await super().record(call, answerer)
        record.extra["echoed"] = len(call.candidates)
        return record

    @staticmethod
    def settings(config: Any) -> str:
        return "every record echoed"


def echo_blocks(
    dataset: Dataset, records: Iterable[Record], *, n_bootstrap: int, seed: int
) -> dict[str, Any]:
    echoed = [r.extra["echoed"] for r in records if "echoed" in r.extra]
    return {"echo": {"records": len(echoed), "candidates": sum(echoed)}} if echoed else {}


def echo_section(runs: Sequence[tuple[str, Mapping[str, Any]]]) -> list[Section]:
    rows = [[label, str(m["echo"]["records"])] for label, m in runs if m.get("echo")]
    return [Section("Echoes", [(["run", "echoed records"], rows)], "Echo note.")] if rows else []


def first_is_relevant(block: RankedBlock, k: int) -> FloatArray:
    """1 when the candidate sorted first (the first of a tie) is relevant."""
    relevant: FloatArray = (block.sorted.gains[:, 0] > 0).astype(float)
    return relevant


@pytest.fixture
def registered() -> Iterator[None]:
    metrics, protocols = dict(registry.METRICS), dict(PROTOCOLS)
    registry.register_metric("first_relevant", "1st-rel")(first_is_relevant)
    register_protocol(
        Protocol(
            "echo",
            "a scorer's ranking, every record echoed",
            plans={"scorer": EchoCalls},
            blocks=("echo",),
            metrics=echo_blocks,
            report=echo_section,
        )
    )
    yield
    registry.METRICS.clear()
    registry.METRICS.update(metrics)
    PROTOCOLS.clear()
    PROTOCOLS.update(protocols)


@pytest.mark.usefixtures("registered")
def test_a_throwaway_metric_and_protocol_reach_every_output(tmp_path: Path) -> None:
    dataset = write_tiny_dataset(tmp_path / "data", n_items=4)
    experiment = tmp_path / "echo.yaml"
    experiment.write_text(
        f"name: echo\ndataset: {dataset}\nprotocol: echo\nn_bootstrap: 20\n"
        "providers: [{name: random, seed: 1}, {name: random, seed: 2, label: second}]\n"
        "inputs: {dialogue: full, music: caption}\n"
    )
    results = tmp_path / "results"
    ran = runner.invoke(
        app,
        ["run", str(experiment), "--results-dir", str(results), "--cache-dir", str(tmp_path)],
        terminal_width=250,
    )
    assert ran.exit_code == 0, ran.output
    assert "1st-rel" in ran.stdout  # the terminal table
    runs = sorted(p for p in (results / "echo").iterdir() if p.is_dir())
    assert len(runs) == 2
    metrics = json.loads((runs[0] / "metrics.json").read_text())
    assert metrics["echo"] == {"records": 4, "candidates": 16}
    assert list(metrics["metrics"])[4] == "first_relevant"
    report = (runs[0] / "report.md").read_text()
    assert "- protocol: `echo` (every record echoed)" in report
    assert "| 1st-rel |" in report and "## Echoes" in report and "Echo note." in report
    comparison = (results / "echo" / "comparison.md").read_text()
    assert "1st-rel" in comparison and "## Echoes" in comparison

    out = tmp_path / "report"
    reported = runner.invoke(app, ["report", str(results / "echo"), "--out", str(out)])
    assert reported.exit_code == 0, reported.output
    assert "## Echoes" in (out / "comparison.md").read_text()
    assert "first_relevant_mean" in (out / "comparison.csv").read_text()
    page = (out / "report.html").read_text()
    assert '<section id="protocol-echoes">' in page and "echoed records" in page
    assert "<th>1st-rel</th>" in page

    sides = [str(runs[0]), str(runs[1])]
    out_compare = ["--out", str(tmp_path / "compare")]
    compared = runner.invoke(app, ["compare", *sides, "--metric", "first_relevant", *out_compare])
    assert compared.exit_code == 0, compared.output
    assert "first_relevant" in compared.stdout
