"""Where a run's numbers came from (run.json's `provenance`): the harness version and git
commit, Python and the key packages' versions, whether the installed packages equal the lock,
when the run started and ended, and the endpoint every API provider actually called. Reports
mark runs whose endpoint is not official, or whose environment drifted from the lock."""

from __future__ import annotations

import hashlib
import platform
import re
import subprocess
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

from harness._version import __version__
from harness.core.files import read_text

ROOT = Path(__file__).resolve().parents[2]
LOCK_FILES = ("requirements/lock.txt", "requirements/no-deps.txt")  # absent in a wheel install
VENV_SEED = frozenset({"pip"})  # installed by `python -m venv` itself, not by the lock
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", re.MULTILINE)

KEY_PACKAGES = (
    "numpy",
    "scipy",
    "pydantic",
    "jinja2",
    "google-genai",
    "openai",
    "torch",
    "transformers",
    "sentence-transformers",
    "matplotlib",
    "datasets",
)


def now() -> str:
    """The current UTC time, ISO 8601 to the second."""
    return datetime.now(UTC).isoformat(timespec="seconds")


@cache
def git_commit(root: Path | None = None) -> dict[str, Any] | None:
    """The commit of the checkout the harness runs from and whether its tracked files have
    changes; None when it was installed from a wheel or git is unavailable."""
    root = root or ROOT
    if not (root / ".git").exists():
        return None

    def git(*args: str) -> str:
        command = ["git", "-C", str(root), *args]
        return subprocess.run(
            command, capture_output=True, text=True, timeout=10, check=True
        ).stdout

    try:
        head = git("rev-parse", "HEAD").strip()
        status = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": head, "dirty": bool(status.strip())}


def package_versions(names: tuple[str, ...] = KEY_PACKAGES) -> dict[str, str]:
    """Installed versions of `names`; packages that are not installed are left out."""
    from importlib import metadata  # imported here: not for every command's start

    found = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def locked_versions(root: Path = ROOT) -> tuple[dict[str, str], str] | None:
    """(package -> pinned version, sha256 of the lock files) of a source checkout's lock;
    None when there is no lock (a wheel install)."""
    texts = []
    for name in LOCK_FILES:
        path = root / name
        if not path.is_file():
            return None
        texts.append(read_text(path))
    joined = "".join(texts)
    pins = {_normalized(m.group(1)): m.group(2) for m in _PIN.finditer(joined)}
    return pins, hashlib.sha256(joined.encode()).hexdigest()


def installed_versions() -> dict[str, str]:
    """Every distribution installed on sys.path, by normalised name, from the
    `NAME-VERSION.dist-info` folder names (not each METADATA file)."""
    found: dict[str, str] = {}
    for entry in sys.path:
        folder = Path(entry or ".")
        if not folder.is_dir():
            continue
        for info in sorted(folder.glob("*.dist-info")):
            name, _, version = info.name.removesuffix(".dist-info").partition("-")
            if version:
                found.setdefault(_normalized(name), version)
    return found


@cache
def environment(root: Path = ROOT) -> dict[str, Any]:
    """`state`: `locked` when the installed packages are exactly the lock's pins, `drifted`
    otherwise (`differs`: `{name: {"locked": ..., "installed": ...}}`), `unlocked` without a
    lock. The project itself and the venv's own pip are not compared."""
    lock = locked_versions(root)
    if lock is None:
        return {"state": "unlocked"}
    pins, digest = lock
    installed = installed_versions()
    skip = VENV_SEED | {"bgm-judge"}
    differs = {
        name: {"locked": pins.get(name), "installed": installed.get(name)}
        for name in sorted((pins.keys() | installed.keys()) - skip)
        if pins.get(name) != installed.get(name)
    }
    block: dict[str, Any] = {"state": "drifted" if differs else "locked", "lock_sha256": digest}
    if differs:
        block["differs"] = differs
    return block


def provenance(
    *,
    started_at: str,
    endpoints: Mapping[str, Mapping[str, Any] | None],
    dataset: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The block run.json stores under `provenance`; `endpoints` maps a role (`provider`,
    `summarizer`) to that provider's `endpoint()` (None for in-process models: left out);
    `dataset` is where a Hugging Face dataset came from."""
    block = {
        "harness_version": __version__,
        "git": git_commit(),
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "packages": package_versions(),
        "environment": environment(),
        "started_at": started_at,
        "finished_at": now(),
        "endpoints": {role: dict(e) for role, e in endpoints.items() if e is not None},
    }
    if dataset is not None:
        block["dataset"] = dict(dataset)
    return block


def unofficial_endpoints(run_json: Mapping[str, Any]) -> list[str]:
    """One phrase per API endpoint of a run that is not its provider's official service,
    e.g. "provider: http://127.0.0.1:8765 (from GEMINI_BASE_URL)"."""
    block = run_json.get("provenance")
    endpoints = block.get("endpoints") if isinstance(block, Mapping) else None
    if not isinstance(endpoints, Mapping):
        return []
    marks = []
    for role, endpoint in endpoints.items():
        if isinstance(endpoint, Mapping) and endpoint.get("official") is False:
            urls = ", ".join(str(u) for u in endpoint.get("base_urls") or [])
            marks.append(f"{role}: {urls} (from {endpoint.get('source', '?')})")
    return marks


def drifted_packages(run_json: Mapping[str, Any]) -> list[str]:
    """One phrase per package whose installed version differed from the lock when the run was
    made, e.g. "peft 0.20.0 (lock: 0.21.2)"."""
    block = run_json.get("provenance")
    env = block.get("environment") if isinstance(block, Mapping) else None
    if not isinstance(env, Mapping) or env.get("state") != "drifted":
        return []
    differs = env.get("differs")
    if not isinstance(differs, Mapping):
        return ["(packages not recorded)"]
    phrases = []
    for name, versions in differs.items():
        versions = versions if isinstance(versions, Mapping) else {}
        installed = versions.get("installed") or "not installed"
        phrases.append(f"{name} {installed} (lock: {versions.get('locked') or 'not pinned'})")
    return phrases
