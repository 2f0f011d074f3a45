"""Where a run's numbers came from, recorded in run.json's `provenance` block: the harness
version and git commit, Python and the versions of the packages that shape the answers or
the metrics, whether the installed packages equal the project's lock, when the run started and
ended, and the endpoint every API provider actually called (a base URL from the environment
included). Reports read the block back to mark runs whose endpoint is not the provider's
official service, and runs made in an environment that drifted from the lock."""

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
# The lock `make install` installs exactly (requirements/lock.txt, then the packages installed
# without their dependencies); absent when the harness was installed from a wheel.
LOCK_FILES = ("requirements/lock.txt", "requirements/no-deps.txt")
# Installed by `python -m venv` itself, not by the lock.
VENV_SEED = frozenset({"pip"})
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
    root = root or Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        status = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
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
    """Every distribution installed on sys.path, by normalised name. Read from the
    `NAME-VERSION.dist-info` folder names, without parsing each METADATA file through
    importlib.metadata (slow for the ~190 packages of the lock)."""
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
    """`state`: `locked` when every installed package is pinned in the lock at the installed
    version and every pinned one is installed, `drifted` otherwise (`differs` names each
    package: `{"locked": version or None, "installed": version or None}`), `unlocked` when
    there is no lock to compare with. The project itself and the venv's own pip are not
    compared."""
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
    `summarizer`) to that provider's `endpoint()` (None for in-process models, left out);
    `dataset` is where a Hugging Face dataset came from (its uri, the revision asked for and
    the commit it resolved to, its fingerprint), left out for a dataset folder."""
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
    e.g. "provider: http://127.0.0.1:8765 (from GEMINI_BASE_URL)"; empty for official ones,
    in-process models, and runs made before provenance was recorded."""
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
    made, e.g. "peft 0.20.0 (lock: 0.21.2)"; empty for locked, unlocked and older runs."""
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
