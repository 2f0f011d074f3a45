"""Issue 43: every module of the package reads in one sitting."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MAX_LINES = 400


def test_no_package_module_is_over_400_lines() -> None:
    modules = sorted(p for root in ("harness", "providers") for p in (REPO / root).rglob("*.py"))
    assert len(modules) > 100  # the package is where this test looks
    long = {
        str(p.relative_to(REPO)): n
        for p in modules
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines (split them by concept): {long}"
