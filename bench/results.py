"""bench/RESULTS.md: written from this run's results, keeping the sections of benchmarks not
run this time (each section says when it was measured), and comparing each benchmark's
tracked ratios with the file's previous figures, so that a regression of more than
`REGRESSION` shows in the file (and in its diff) as a flagged row, not only as a changed number.

A tracked figure is a ratio against a reference measured in the same run (harness / floor,
warm / cold, peak(largest) / peak(smallest), ...) where lower is better: ratios, unlike raw
timings, carry over between runs on a machine whose load differs.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.common import BenchResult

REGRESSION = 0.10
RESULTS_HEADER = "| benchmark | result | goal | met |"
_ROW = re.compile(r"^\| (?P<name>[a-z_]+) \| .* \|$")
_FIGURE = re.compile(r"^- (?P<key>.+?): (?P<value>-?[0-9.]+(?:e-?[0-9]+)?)$")


@dataclass
class Section:
    """One benchmark's part of a results file: its table row and its `## name` block."""

    row: str
    block: list[str]

    def figure(self, key: str) -> float | None:
        for line in self.block:
            match = _FIGURE.match(line)
            if match and match["key"] == key:
                return float(match["value"])
        return None


def read_sections(path: Path) -> dict[str, Section]:
    """The sections of an earlier results file by benchmark name (none when it is absent)."""
    if not path.is_file():
        return {}
    lines = path.read_text().splitlines()
    rows = {
        m["name"]: line
        for line in _results_table(lines)
        if (m := _ROW.match(line)) and m["name"] != "-"
    }
    sections: dict[str, Section] = {}
    current: str | None = None
    for line in lines:
        if line.startswith("## "):
            name = line[3:].strip()
            current = name if name in rows else None
            if current is not None:
                sections[current] = Section(rows[current], [])
        elif current is not None:
            sections[current].block.append(line)
    for section in sections.values():
        while section.block and not section.block[-1].strip():
            section.block.pop()
    return sections


def _results_table(lines: list[str]) -> list[str]:
    """The lines of the results table (not of the changes table, whose rows also start with a
    benchmark's name)."""
    if RESULTS_HEADER not in lines:
        return []
    start = lines.index(RESULTS_HEADER)
    return list(itertools.takewhile(lambda line: line.startswith("|"), lines[start:]))


def _date_of(path: Path) -> str:
    if path.is_file():
        for line in path.read_text().splitlines():
            if line.startswith("- date:"):
                return line[8:].strip()
    return "?"


def changes(results: list[BenchResult], previous: dict[str, Section]) -> list[str]:
    """One table row per tracked ratio that the previous file also has."""
    rows = []
    for result in results:
        section = previous.get(result.name)
        if section is None:
            continue
        for key in result.tracked:
            before, now = section.figure(key), result.figures.get(key)
            if before is None or not isinstance(now, int | float) or before <= 0:
                continue
            change = now / before - 1
            flag = (
                "**regressed**"
                if change > REGRESSION
                else ("improved" if change < -REGRESSION else "")
            )
            rows.append(
                f"| {result.name} | {key} | {before:g} | {now:g} | {change:+.1%} | {flag} |"
            )
    if not rows:
        return []
    return [
        "",
        f"## Changes since the previous results (lower is better; flagged beyond {REGRESSION:.0%})",
        "",
        "| benchmark | figure | before | now | change | |",
        "|---|---|---|---|---|---|",
        *rows,
    ]


def write_results(
    path: Path,
    results: list[BenchResult],
    header: list[str],
    command: str,
    describe: Callable[[str], str],
    order: list[str],
) -> None:
    """Write `path`: this run's results, then the sections of the previous file for
    benchmarks this run did not measure (in the order of `order`)."""
    previous = read_sections(path)
    before = _date_of(path)
    measured = {r.name: r for r in results}
    date = next((line for line in header if line.startswith("- date:")), "- date: ?")
    lines = [
        "# Benchmark results",
        "",
        f"Written by `{command}`. Every ratio is measured in the same run as its reference.",
        "",
        *header,
        "",
        RESULTS_HEADER,
        "|---|---|---|---|",
    ]
    kept = [name for name in order if name not in measured and name in previous]
    for name in order:
        if name in measured:
            r = measured[name]
            met = {True: "yes", False: "**no**", None: "-"}[r.met]
            lines.append(f"| {r.name} | {r.summary} | {r.goal or '-'} | {met} |")
        elif name in kept:
            lines.append(previous[name].row)
    lines += changes(results, previous)
    for name in order:
        if name in measured:
            r = measured[name]
            lines += ["", f"## {r.name}", "", describe(r.name), "", f"- measured: {date[8:]}"]
            lines += [f"- {key}: {value}" for key, value in r.figures.items()]
            lines += [f"- note: {note}" for note in r.notes]
        elif name in kept:
            block = previous[name].block
            if not any(line.startswith("- measured:") for line in block):
                at = next((i for i, line in enumerate(block) if line.startswith("- ")), len(block))
                block = [*block[:at], f"- measured: {before}", *block[at:]]
            lines += ["", f"## {name}", *block]
    path.write_text("\n".join(lines) + "\n")
