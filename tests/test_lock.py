"""The lock (requirements/lock.txt) is consistent with pyproject.toml: every package a range
names is pinned, at a version inside the range, and the constraints every lock keeps hold. A
range edited without `make lock` fails here, not on a fresh machine."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", re.MULTILINE)


def pins(name: str) -> dict[str, str]:
    text = (ROOT / "requirements" / name).read_text()
    return {canonicalize_name(m.group(1)): m.group(2) for m in PIN.finditer(text)}


def project_requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    listed = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        listed += extra
    found = [Requirement(r) for r in listed]
    return [r for r in found if canonicalize_name(r.name) != "bgm-judge"]


def test_every_range_of_pyproject_is_pinned_inside_it() -> None:
    locked = pins("lock.txt")
    outside = {
        r.name: locked.get(canonicalize_name(r.name))
        for r in project_requirements()
        if not r.specifier.contains(locked.get(canonicalize_name(r.name), "0"), prereleases=True)
    }
    assert outside == {}, "pyproject.toml changed without `make lock`"


def test_every_pin_has_hashes_and_the_constraints_hold() -> None:
    text = (ROOT / "requirements" / "lock.txt").read_text()
    blocks = re.split(r"\n(?=[A-Za-z0-9])", text.strip())
    unhashed = [b.split()[0] for b in blocks if "==" in b and "--hash=sha256:" not in b]
    assert unhashed == []
    locked = pins("lock.txt")
    for name, version in pins("constraints.txt").items():
        assert locked[name] == version


def test_the_no_deps_packages_are_the_ones_listed() -> None:
    wanted = pins("no-deps.in")
    assert pins("no-deps.txt") == wanted
    assert not set(wanted) & set(pins("lock.txt"))
