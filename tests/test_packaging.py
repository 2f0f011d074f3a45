"""The wheel carries everything the harness needs at run time (packages are listed by hand
in pyproject.toml so that prompts/ can ship inside the wheel)."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_python_package_is_listed() -> None:
    on_disk = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in ("harness", "providers")
        for init in (ROOT / top).rglob("__init__.py")
    }
    assert on_disk <= set(SETUPTOOLS["packages"])


def test_every_prompt_template_ships_in_the_wheel() -> None:
    assert SETUPTOOLS["package-dir"]["harness.bundled_prompts"] == "prompts"
    globs = SETUPTOOLS["package-data"]["harness.bundled_prompts"]
    templates = [p.name for p in (ROOT / "prompts").iterdir() if p.is_file()]
    assert templates
    unshipped = [t for t in templates if not any(fnmatch.fnmatch(t, g) for g in globs)]
    assert unshipped == []


def test_package_data_folders_are_covered() -> None:
    data = SETUPTOOLS["package-data"]
    for package, folder, pattern in [
        ("harness.reports", "harness/reports/templates", "templates/*"),
        ("harness.construct.annotate", "harness/construct/annotate/static", "static/*"),
    ]:
        files = [p.name for p in (ROOT / folder).iterdir() if p.is_file()]
        globs = data[package]
        for name in files:
            assert any(fnmatch.fnmatch(f"{pattern[:-1]}{name}", g) for g in globs), name


def test_the_packages_declare_their_type_hints() -> None:
    """PEP 561: type checkers read the hints of an installed harness and providers."""
    for package in ("harness", "providers"):
        assert (ROOT / package / "py.typed").is_file()
        assert "py.typed" in SETUPTOOLS["package-data"][package]
