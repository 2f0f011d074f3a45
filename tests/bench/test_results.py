"""bench/RESULTS.md across runs (`bench.results`): a partial run keeps the other benchmarks'
sections, and a tracked ratio that got more than 10% worse is flagged."""

from __future__ import annotations

from pathlib import Path

from bench.common import BenchResult
from bench.results import read_sections, write_results

ORDER = ["ceiling", "replay", "metrics"]


def _write(path: Path, results: list[BenchResult], date: str) -> None:
    write_results(path, results, [f"- date: {date}"], "python -m bench", str.upper, ORDER)


def _ceiling(ratio: float) -> BenchResult:
    figures = {"calls": 4800, "harness/floor CPU": ratio}
    return BenchResult("ceiling", f"ratio {ratio}", figures, tracked=("harness/floor CPU",))


def test_a_partial_run_keeps_the_other_sections_with_their_date(tmp_path: Path) -> None:
    path = tmp_path / "RESULTS.md"
    replay = BenchResult("replay", "warm 9 s", {"warm/cold (min)": 0.05}, goal="<= 10 s", met=True)
    _write(path, [_ceiling(1.4), replay], "2026-11-24 10:00 UTC")
    _write(path, [_ceiling(1.2)], "2026-11-25 10:00 UTC")
    sections = read_sections(path)
    assert list(sections) == ["ceiling", "replay"]
    assert sections["ceiling"].figure("harness/floor CPU") == 1.2
    assert sections["replay"].figure("warm/cold (min)") == 0.05
    assert "- measured: 2026-11-24 10:00 UTC" in sections["replay"].block
    assert "- measured: 2026-11-25 10:00 UTC" in sections["ceiling"].block
    assert sections["replay"].row == "| replay | warm 9 s | <= 10 s | yes |"


def test_a_regression_beyond_ten_percent_is_flagged(tmp_path: Path) -> None:
    path = tmp_path / "RESULTS.md"
    _write(path, [_ceiling(1.30)], "2026-11-24 10:00 UTC")
    _write(path, [_ceiling(1.40)], "2026-11-25 10:00 UTC")  # +7.7%: shown, not flagged
    text = path.read_text()
    assert "| ceiling | harness/floor CPU | 1.3 | 1.4 | +7.7% |  |" in text
    _write(path, [_ceiling(1.60)], "2026-11-26 10:00 UTC")  # +14.3%
    assert (
        "| ceiling | harness/floor CPU | 1.4 | 1.6 | +14.3% | **regressed** |" in path.read_text()
    )
    _write(path, [_ceiling(1.20)], "2026-11-27 10:00 UTC")
    assert "| -25.0% | improved |" in path.read_text()


def test_a_first_run_has_no_changes_table(tmp_path: Path) -> None:
    path = tmp_path / "RESULTS.md"
    _write(path, [_ceiling(1.3)], "2026-11-24 10:00 UTC")
    assert "Changes since" not in path.read_text() and "## ceiling" in path.read_text()


def test_a_kept_section_keeps_its_result_row_not_a_changes_row(tmp_path: Path) -> None:
    """A benchmark not run this time keeps its row of the results table, even when the
    previous file's changes table has a row for it too (which starts with its name)."""
    path = tmp_path / "RESULTS.md"
    _write(path, [_ceiling(1.4)], "2026-11-24 10:00 UTC")
    _write(path, [_ceiling(1.2)], "2026-11-25 10:00 UTC")  # a changes row for ceiling
    assert "| ceiling | harness/floor CPU | 1.4 | 1.2 |" in path.read_text()
    replay = BenchResult("replay", "warm 9 s", {"warm/cold (min)": 0.05}, goal="<= 10 s", met=True)
    _write(path, [replay], "2026-11-26 10:00 UTC")
    assert read_sections(path)["ceiling"].row == "| ceiling | ratio 1.2 | - | - |"
