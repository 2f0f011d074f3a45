"""Every test folder is collected by the default `pytest` run: pytest's `norecursedirs` skips
folders named build, dist, venv and dot-folders, which once hid 47 tests from CI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"


def test_every_test_file_is_collected_by_the_default_run() -> None:
    on_disk = {
        path.relative_to(ROOT).as_posix()
        for path in TESTS.rglob("test_*.py")
        if "__pycache__" not in path.parts
    }
    listed = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    ).stdout
    collected = {line.split("::", 1)[0] for line in listed.splitlines() if "::" in line}
    assert on_disk - collected == set(), "test files the default run does not collect"
    construct_tests = [t for t in listed.splitlines() if t.startswith("tests/harness/construct/")]
    assert len(construct_tests) >= 40
