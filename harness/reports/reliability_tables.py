"""The Judge reliability section of the reports from metrics.json's `reliability` blocks: a
row per figure, a column per run; then what a run could not measure and what would."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.reports.formatting import format_metric
from harness.reports.protocol_tables import Section

POSITIONS_SHOWN = 10  # top-pick rate rows of the first positions (a pool has many)
NOTE = (
    "Means over items of a per-item value, 95% bootstrap CIs over items; orders: pairs of "
    "answers shown in different orders, repeats: in the same order; alpha: ordinal "
    "Krippendorff's (docs/metrics.md#judge-reliability)."
)

FIGURES: list[tuple[str, str, str]] = [
    ("same top pick across orders", "position_consistency", "top_pick"),
    ("tau-b between orders", "position_consistency", "tau_b"),
    ("tau-b between repeats (same order)", "repetition_stability", "tau_b"),
    ("top pick changes between repeats", "repetition_stability", "top_pick_change"),
    ("alpha, judge vs annotators", "human_agreement", "alpha"),
    ("alpha among annotators (ceiling)", "human_agreement", "alpha_human"),
    ("calls failed", "rates", "error"),
    ("answers unparsable", "rates", "parse_failure"),
    ("answers refused", "rates", "refusal"),
    ("answers tied at the top", "rates", "tie"),
]


def _fairness_rows(blocks: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    fairness = [block.get("preference_fairness") or {} for block in blocks]
    rates = [f.get("top1_rate") or [] for f in fairness]
    uniform = next((f["uniform"] for f in fairness if f), 0.0)
    rows = [
        [f"top pick at position {p + 1} (uniform {uniform:.3f})"]
        + [format_metric(r[p]) if p < len(r) else "n/a" for r in rates]
        for p in range(min(max(map(len, rates), default=0), POSITIONS_SHOWN))
    ]
    p_values = [f.get("p_value") for f in fairness]
    label = "chi-square p, top pick by position vs uniform"
    return [*rows, [label] + ["n/a" if p is None else f"{p:.4f}" for p in p_values]]


def _rank_cell(block: Mapping[str, Any]) -> str:
    agreement = block.get("human_agreement") or {}
    if agreement.get("rank") is None:
        return "n/a"
    (low, high), raters = agreement["rank_ci95"], agreement["annotators"] + 1
    return f"{agreement['rank']:g} of {raters} [{low:g}, {high:g}]"


def reliability_section(runs: Sequence[tuple[str, Mapping[str, Any]]]) -> list[Section]:
    """`Judge reliability` for the runs whose metrics.json has a `reliability` block."""
    judged = [(label, m["reliability"]) for label, m in runs if m.get("reliability")]
    if not judged:
        return []
    blocks = [block for _, block in judged]

    def rows_of(figures: list[tuple[str, str, str]]) -> list[list[str]]:
        return [
            [name, *(format_metric((b.get(group) or {}).get(key)) for b in blocks)]
            for name, group, key in figures
        ]

    rows = rows_of(FIGURES[:4]) + _fairness_rows(blocks) + rows_of(FIGURES[4:6])
    rows += [["judge's rank among the raters", *map(_rank_cell, blocks)], *rows_of(FIGURES[6:])]
    shown = [row for row in rows if any(cell != "n/a" for cell in row[1:])]
    one = len(judged) == 1
    header = ["figure", "value"] if one else ["figure", *(label for label, _ in judged)]
    tables = [(header, shown)]
    missing = [  # (run, figure, why, the `--set` settings of a run that measures it)
        [
            label,
            figure.replace("_", " "),
            why["reason"],
            " ".join(f"--set {s}" for s in why["set"]) or "n/a",
        ]
        for label, block in judged
        for figure, why in (block.get("not_measured") or {}).items()
    ]
    if missing:
        why = ["run", "not measured", "why", "measured by"]
        tables.append((why[1:], [row[1:] for row in missing]) if one else (why, missing))
    return [Section("Judge reliability", tables, NOTE)]
