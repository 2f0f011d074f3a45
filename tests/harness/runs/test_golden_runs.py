"""The redesign moved no number and no cache key: the quickstart and Table 7 against the fake
API, run afresh (once per test session: the docs check reads the same runs), give every figure of the `metrics.json` and every line of the `cache_keys.txt`
that the code of 2026-11-28 (before the package redesign) wrote, kept in `golden/`. A figure a
later change adds to metrics.json is allowed; one that changes is not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow
GOLDEN = Path(__file__).with_name("golden")


def _missing_or_changed(golden: Any, fresh: Any, where: str = "") -> list[str]:
    if isinstance(golden, dict):
        if not isinstance(fresh, dict):
            return [f"{where}: {fresh!r}"]
        return [
            line
            for key, value in golden.items()
            for line in _missing_or_changed(value, fresh.get(key), f"{where}.{key}")
        ]
    return [] if golden == fresh else [f"{where}: {golden!r} -> {fresh!r}"]


def _compare(name: str, results: Path) -> None:
    runs = sorted((GOLDEN / name).iterdir())
    assert runs
    for golden_run in runs:
        fresh_run = results / name / golden_run.name
        golden_metrics = json.loads((golden_run / "metrics.json").read_text())
        fresh_metrics = json.loads((fresh_run / "metrics.json").read_text())
        assert _missing_or_changed(golden_metrics, fresh_metrics, golden_run.name) == []
        keys = (golden_run / "cache_keys.txt").read_text()
        assert (fresh_run / "cache_keys.txt").read_text() == keys, golden_run.name


def test_the_quickstart_gives_the_same_figures_and_cache_keys(
    quickstart_run: tuple[Path, str],
) -> None:
    _compare("quickstart", quickstart_run[0])


def test_table7_on_the_fake_api_gives_the_same_figures_and_cache_keys(table7_run: Path) -> None:
    _compare("table7", table7_run)
