"""Where a run's numbers came from, recorded in run.json's `provenance` block: the harness
version and git commit, Python and the versions of the packages that shape the answers or
the metrics, when the run started and ended, and the endpoint every API provider actually
called (a base URL from the environment included). Reports read the block back to mark runs
whose endpoint is not the provider's official service."""

from __future__ import annotations

import platform
import subprocess
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from harness._version import __version__

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
)


def now() -> str:
    """The current UTC time, ISO 8601 to the second."""
    return datetime.now(UTC).isoformat(timespec="seconds")


@cache
def git_commit(root: Path | None = None) -> dict[str, Any] | None:
    """The commit of the checkout the harness runs from and whether its tracked files have
    changes; None when it was installed from a wheel or git is unavailable."""
    root = root or Path(__file__).resolve().parent.parent
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
    found = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def provenance(
    *, started_at: str, endpoints: Mapping[str, Mapping[str, Any] | None]
) -> dict[str, Any]:
    """The block run.json stores under `provenance`; `endpoints` maps a role (`provider`,
    `summarizer`) to that provider's `endpoint()` (None for in-process models, left out)."""
    return {
        "harness_version": __version__,
        "git": git_commit(),
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "packages": package_versions(),
        "started_at": started_at,
        "finished_at": now(),
        "endpoints": {role: dict(e) for role, e in endpoints.items() if e is not None},
    }


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
