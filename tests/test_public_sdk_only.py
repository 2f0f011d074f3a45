"""The harness and its providers call libraries through their public API only: no module of
harness/ or providers/ imports or names a private name of a third-party package
(`openai._base_client`, `google.genai._api_client`, `httpx._transports`, `typer._click`,
...). A private name can change in any release; the lock hides that, a user's own
environment does not."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIRST_PARTY = frozenset({"harness", "providers", "tests", "bench"})


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _third_party(module: str) -> bool:
    root = module.split(".")[0]
    return root not in FIRST_PARTY and root not in sys.stdlib_module_names


def private_names(source: str) -> list[str]:
    """`line: name` for each private name of a third-party package that `source` imports,
    or reaches as an attribute of a module it imported."""
    found: list[str] = []
    modules: dict[str, str] = {}  # local name -> the third-party module it is bound to
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not _third_party(alias.name):
                    continue
                if any(_private(part) for part in alias.name.split(".")):
                    found.append(f"{node.lineno}: {alias.name}")
                local = alias.asname or alias.name.split(".")[0]
                modules[local] = alias.name if alias.asname else local
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if not _third_party(node.module):
                continue
            if any(_private(part) for part in node.module.split(".")):
                found.append(f"{node.lineno}: {node.module}")
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"{node.lineno}: {node.module}.{alias.name}")
                modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    attributes = [node for node in ast.walk(tree) if isinstance(node, ast.Attribute)]
    inner = {id(node.value) for node in attributes}
    for node in attributes:
        if id(node) in inner:  # part of a longer chain: reported with it
            continue
        chain: list[str] = []
        base: ast.expr = node
        while isinstance(base, ast.Attribute):
            chain.append(base.attr)
            base = base.value
        if isinstance(base, ast.Name) and base.id in modules:
            chain.reverse()
            if any(_private(part) for part in chain):
                found.append(f"{node.lineno}: {modules[base.id]}.{'.'.join(chain)}")
    return found


SOURCES = sorted(
    path for folder in ("harness", "providers") for path in (ROOT / folder).rglob("*.py")
)


def test_the_check_finds_each_kind_of_private_name() -> None:
    source = """
import openai._base_client
import httpx._transports.default as transports
from google.genai import _api_client
from openai._base_client import make_request_options
from aiohttp import ClientResponse
import typer
import asyncio
typer._click.core
asyncio._get_running_loop()
ClientResponse._body
typer.Typer
from harness.core import _private_helper
"""
    found = [line.split(": ", 1)[1] for line in private_names(source)]
    assert sorted(found) == sorted(
        [
            "openai._base_client",
            "httpx._transports.default",
            "google.genai._api_client",
            "openai._base_client",
            "aiohttp.ClientResponse._body",
            "typer._click.core",
        ]
    )


def test_no_module_uses_a_private_name_of_a_library() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in SOURCES
        for line in private_names(path.read_text(encoding="utf-8"))
    ]
    assert SOURCES and found == []
