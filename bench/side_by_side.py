"""`python -m bench NAME ... --against TREE`: each benchmark run as a whole process in this
checkout and in another one (its own bench code, harness and virtual environment), the two
alternating per benchmark, so that both sides meet the same machine load; the figures they
share are written side by side with their ratio into a section of the results file."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from bench.common import REPO, Size

MARKER = "BENCH-FIGURES "
_RUN = (
    "import json, sys; from bench.__main__ import run_one; "
    "result = run_one(sys.argv[1], sys.argv[2]); "
    f"print({MARKER!r} + json.dumps(result.figures, default=str))"
)
BEGIN = "<!-- side by side: begin -->"
END = "<!-- side by side: end -->"


def figures_in(tree: Path, name: str, size: Size) -> dict[str, Any]:
    """The figures of benchmark `name` run by `tree`'s own code and interpreter."""
    done = subprocess.run(
        [str(tree / ".venv" / "bin" / "python"), "-c", _RUN, name, size],
        cwd=tree,
        capture_output=True,
        text=True,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith(MARKER)]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{name} in {tree} exited {done.returncode}: {done.stderr[-2000:]}")
    figures: dict[str, Any] = json.loads(lines[-1][len(MARKER) :])
    return figures


def commit_of(tree: Path) -> str:
    done = subprocess.run(
        ["git", "-C", str(tree), "log", "-1", "--format=%h %cs %s"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip()[:90] or "unknown commit"


def compare(names: list[str], other: Path, size: Size) -> list[str]:
    """Markdown rows: benchmark, figure, this checkout, the other, this / other."""
    rows = [
        "| benchmark | figure | this checkout | other | this / other |",
        "|---|---|---|---|---|",
    ]
    for index, name in enumerate(names):
        order = [REPO, other] if index % 2 == 0 else [other, REPO]
        results = {tree: figures_in(tree, name, size) for tree in order}
        mine, theirs = results[REPO], results[other]
        for key in [k for k in mine if k in theirs]:
            a, b = mine[key], theirs[key]
            numeric = isinstance(a, int | float) and isinstance(b, int | float)
            quotient = f"{a / b:.2f}" if numeric and b else ""
            rows.append(f"| {name} | {key} | {a} | {b} | {quotient} |")
        print(f"[{name}] side by side: {len([k for k in mine if k in theirs])} figures", flush=True)
    return rows


def write_section(path: Path, header: list[str], other: Path, rows: list[str]) -> None:
    """Replace (or append) the side-by-side section of `path`, keeping everything else."""
    section = [
        BEGIN,
        "## Side by side",
        "",
        f"This checkout ({commit_of(REPO)}) against `{other}` ({commit_of(other)}), each "
        "benchmark run as a whole process by each side's own code, alternately.",
        "",
        *header,
        "",
        *rows,
        END,
    ]
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmark results\n"
    if BEGIN in text and END in text:
        before, rest = text.split(BEGIN, 1)
        text = before + "\n".join(section) + rest.split(END, 1)[1]
    else:
        text = text.rstrip() + "\n\n" + "\n".join(section) + "\n"
    path.write_text(text, encoding="utf-8")
