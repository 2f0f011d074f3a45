"""bench/soak.py at a small size, so that it cannot rot: every phase (transient faults, and
malformed answers through each SDK) ends with every candidate scored once and the metrics
of its fault-free run. Answers paid twice are not asserted: on a loaded machine a request
the client timed out on may have been answered by the server, which is what the soak counts."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import common, soak
from bench.common import DatasetSpec


def test_soak_keeps_every_record_and_the_fault_free_metrics(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(common, "OUT", tmp_path / "out")
    monkeypatch.setitem(soak.SPECS, "tiny", DatasetSpec(30, 120, 0.5))
    result = soak.run("tiny", common.fresh(tmp_path / "work"))
    figures = result.figures
    phases = [figures, figures["malformed_openai"], figures["malformed_gemini"]]
    for phase in phases:
        assert phase["records_lost"] == 0
        assert phase["duplicate_records"] == 0
        assert phase["metrics_equal_fault_free"] is True
        assert sum(phase["faults_at_server"].values()) > 0  # faults were really served
    assert set(figures["malformed_gemini"]["faults_at_server"]) <= set(soak.MALFORMED_KINDS)
