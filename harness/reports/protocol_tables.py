"""The protocols' report sections (`Section`) from metrics.json blocks: a refine or music-crs
run's turns, a describe run's description metrics; `protocol_sections` gathers every registered
protocol's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.config.protocols import PROTOCOLS, resolve
from harness.reports.formatting import format_metric, markdown_table, metric_label, shown_metrics
from harness.scoring import registry

TURNS_NOTE = (
    "Turn 1 ranks from the context; turn 2 after the user's reply to turn 1's top pick. "
    "The run's metrics are turn 2's; SR@K (success@K): the gold in the top K at turn 1 or "
    "turn 2. Gain: mean over items of turn 2 - turn 1 with a 95% paired-bootstrap CI."
)
SESSION_TURNS_NOTE = (  # music-crs: the sessions' turns, the run's nDCG the mean over them
    "Each turn number's mean over the sessions asked it; the run's nDCG is the mean over turn "
    "numbers. Gain: mean over sessions of the last turn - the first, 95% paired-bootstrap CI."
)
DESCRIPTION_NOTE = (
    "Descriptions against the caption of each item's most relevant candidate: corpus BLEU "
    "(sacrebleu, lower-cased, 0-1), ROUGE-L F-measure and the cosine of the two texts in a "
    "text-embedding model, each with a 95% bootstrap CI over items."
)


def turn_rows(label: str, metrics: Mapping[str, Any]) -> list[list[str]]:
    """One row per metric: each turn's value and the gain (last turn - first)."""
    turns = metrics["turns"]
    gains = metrics.get("turn_gain") or {}
    return [
        [
            label,
            metric_label(name),
            *(format_metric(turn["metrics"].get(name)) for turn in turns),
            format_metric(gains.get(name)),
        ]
        for name in shown_metrics(turns)
    ]


def success_rows(label: str, metrics: Mapping[str, Any]) -> list[list[str]]:
    """SR@K: the gold in the top K at some turn."""
    return [
        [label, metric_label(name), format_metric(summary)]
        for name, summary in (metrics.get("metrics") or {}).items()
        if getattr(registry.find(name), "kind", None) == "turns"
    ]


@dataclass(frozen=True)
class Section:
    """A protocol's section of a report: its tables (header, rows) and a note below them;
    report.md and comparison.md write it as markdown, report.html as HTML."""

    title: str
    tables: list[tuple[list[str], list[list[str]]]]
    note: str = ""

    def markdown(self) -> list[str]:
        lines = [f"## {self.title}", ""]
        for header, rows in self.tables:
            lines += [markdown_table(header, rows), ""]
        return lines + ([self.note, ""] if self.note else [])


def turns_section(runs: Sequence[tuple[str, Mapping[str, Any]]]) -> list[Section]:
    """`Turns` for the runs with several turns (metrics.json `turns`)."""
    refined = [(label, m) for label, m in runs if m.get("turns")]
    if not refined:
        return []
    turns = [f"turn {turn['turn']}" for turn in refined[0][1]["turns"]]
    header = ["run", "metric", *turns, "gain (last - first turn)"]
    rows = [row for label, m in refined for row in turn_rows(label, m)]
    success_header = ["run", "metric", "any turn"]
    success = [row for label, m in refined for row in success_rows(label, m)]
    if len(runs) == 1:  # a run's own report: no run column
        header, rows = header[1:], [row[1:] for row in rows]
        success_header, success = success_header[1:], [row[1:] for row in success]
    tables = [(header, rows)] + ([(success_header, success)] if success else [])
    sessions = all("official" in m for _, m in refined)
    return [Section("Turns", tables, SESSION_TURNS_NOTE if sessions else TURNS_NOTE)]


def description_section(runs: Sequence[tuple[str, Mapping[str, Any]]]) -> list[Section]:
    """`Descriptions` for the runs with a `description` block."""
    described = [(label, m["description"]) for label, m in runs if m.get("description")]
    if not described:
        return []
    names = registry.names("description")
    header = ["run", *map(metric_label, names), "items", "words"]
    rows = [
        [
            label,
            *(format_metric(block["metrics"].get(name)) for name in names),
            str(block["n_items"]),
            f"{block['mean_words']:.1f}",
        ]
        for label, block in described
    ]
    return [Section("Descriptions", [(header, rows)], DESCRIPTION_NOTE)]


def protocol_sections(runs: Sequence[tuple[str, Mapping[str, Any]]]) -> list[Section]:
    """The sections of every registered protocol (`harness.config.protocols`), in registry
    order; each protocol's shows the runs that carry its blocks."""
    report = [p.report for p in PROTOCOLS.values() if p.report is not None]
    return [section for ref in report for section in resolve(ref)(runs)]


def protocol_markdown(runs: Sequence[tuple[str, Mapping[str, Any]]]) -> list[str]:
    return [line for section in protocol_sections(runs) for line in section.markdown()]
