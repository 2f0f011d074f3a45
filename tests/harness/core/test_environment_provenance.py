"""run.json says whether the installed packages equal the lock (`environment: locked |
drifted`, naming each package that differs), and reports mark runs made in a drifted
environment as they mark unofficial endpoints."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.main import app
from harness.core import provenance
from harness.core.provenance import drifted_packages, environment, installed_versions

runner = CliRunner()


@pytest.fixture(autouse=True)
def fresh_environment() -> Iterator[None]:
    environment.cache_clear()
    yield
    environment.cache_clear()


def write_lock(root: Path, pins: dict[str, str]) -> None:
    lines = [
        f"{name}=={version} \\\n    --hash=sha256:{'0' * 64}\n" for name, version in pins.items()
    ]
    (root / "requirements").mkdir(parents=True)
    (root / "requirements" / "lock.txt").write_text("".join(lines))
    (root / "requirements" / "no-deps.txt").write_text("")


def pins_of_this_environment() -> dict[str, str]:
    return {n: v for n, v in installed_versions().items() if n not in {"pip", "bgm-judge"}}


def test_the_test_environment_is_the_lock() -> None:
    """`make install` installed exactly requirements/lock.txt and no-deps.txt (CI and
    `make test` run here; `make test-latest` runs in .venv-latest, which drifts on purpose)."""
    if os.environ.get("BGM_JUDGE_ENV") == "latest":
        pytest.skip("make test-latest: the newest releases differ from the lock by design")
    env = environment()
    assert env["state"] == "locked", env.get("differs")
    assert len(env["lock_sha256"]) == 64


def test_a_package_changed_by_hand_is_named(tmp_path: Path) -> None:
    pins = pins_of_this_environment()
    changed = next(iter(sorted(pins)))
    write_lock(tmp_path, {**pins, changed: "0.0.1", "not-installed-pkg": "1.0"})
    env = environment(tmp_path)
    assert env["state"] == "drifted"
    assert env["differs"] == {
        changed: {"locked": "0.0.1", "installed": pins[changed]},
        "not-installed-pkg": {"locked": "1.0", "installed": None},
    }
    phrases = drifted_packages({"provenance": {"environment": env}})
    assert f"{changed} {pins[changed]} (lock: 0.0.1)" in phrases
    assert "not-installed-pkg not installed (lock: 1.0)" in phrases


def test_an_installed_package_the_lock_lacks_is_drift_and_no_lock_is_unlocked(
    tmp_path: Path,
) -> None:
    pins = pins_of_this_environment()
    extra = sorted(pins)[-1]
    write_lock(tmp_path / "a", {n: v for n, v in pins.items() if n != extra})
    env = environment(tmp_path / "a")
    assert env["differs"] == {extra: {"locked": None, "installed": pins[extra]}}
    assert environment(tmp_path / "none") == {"state": "unlocked"}
    assert drifted_packages({"provenance": {"environment": {"state": "unlocked"}}}) == []
    assert drifted_packages({}) == []


def test_a_run_in_a_drifted_environment_says_so_in_run_json_and_every_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = installed_versions()
    monkeypatch.setattr(provenance, "installed_versions", lambda: {**real, "numpy": "1.0.0"})
    experiment = tmp_path / "drift.yaml"
    experiment.write_text(
        "name: drift\ndataset: data/sample\nn_bootstrap: 10\n"
        "providers:\n  - {name: random, seed: 0, label: a}\n  - {name: random, seed: 1, label: b}\n"
    )
    args = ["run", str(experiment), "--results-dir", str(tmp_path / "results"), "--no-progress"]
    result = runner.invoke(app, [*args, "--cache-dir", str(tmp_path / "cache")])
    assert result.exit_code == 0, result.output
    assert f"numpy 1.0.0 (lock: {real['numpy']})" in result.output
    run_json = json.loads(
        (tmp_path / "results" / "drift" / "random_a_full_audio" / "run.json").read_text()
    )
    env = run_json["provenance"]["environment"]
    assert env["state"] == "drifted"
    assert env["differs"] == {"numpy": {"locked": real["numpy"], "installed": "1.0.0"}}
    report = (tmp_path / "results" / "drift" / "random_a_full_audio" / "report.md").read_text()
    assert "environment: **differs from the lock**: numpy 1.0.0" in report
    out = tmp_path / "report"
    result = runner.invoke(app, ["report", str(tmp_path / "results" / "drift"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    comparison = (out / "comparison.md").read_text()
    assert "‡" in comparison and "differs from the lock (numpy 1.0.0" in comparison
