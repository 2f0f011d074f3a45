"""The paired tables of a comparison: each run against its baseline (difference, CI, p,
the minimum detectable difference), the agreement matrix between rankers and the position bias
of joint prompts, as Markdown rows, CSV rows and a terminal table."""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.reports.analysis import Analysis
from harness.reports.formatting import TerminalTable, metric_label, percent
from harness.scoring.stats import CORRECTION_NAMES

PAIRED_HEADER = [
    "run",
    "baseline",
    "metric",
    "items",
    "run mean",
    "baseline mean",
    "difference",
    "95% CI",
    "p",
    "p adj.",
    "MDD 80%",
]


def paired_rows(analysis: Analysis) -> list[list[str]]:
    rows = []
    for label, metrics in analysis.paired.items():
        for name, diff in metrics.items():
            empty = diff.n_items == 0
            rows.append(
                [
                    label,
                    analysis.paired_with.get(label, "?"),
                    metric_label(name),
                    str(diff.n_items),
                    "n/a" if empty else f"{diff.run_mean:.3f}",
                    "n/a" if empty else f"{diff.baseline_mean:.3f}",
                    "n/a" if empty else f"{diff.difference:+.3f}",
                    "n/a" if empty else f"[{diff.ci95[0]:+.3f}, {diff.ci95[1]:+.3f}]",
                    f"{diff.p_value:.4f}" + ("" if diff.exact else " (MC)"),
                    f"{analysis.adjusted_p[label][name]:.4f}",
                    "n/a" if diff.n_items < 2 else f"{diff.mdd80:.3f}",
                ]
            )
    return rows


def paired_note(analysis: Analysis) -> str:
    """How the paired table reads: the difference, its CI, p and the adjustment."""
    count = sum(len(by) for by in analysis.paired.values())
    adjusted = (
        f"p adj.: {CORRECTION_NAMES[analysis.correction]}-adjusted over the {count} p-values "
        "of this table"
        if analysis.correction != "none" and count > 1
        else "p adj.: as p (no adjustment)"
    )
    return (
        "Difference = run - baseline on the items both runs scored; 95% paired-bootstrap "
        "CI; two-sided sign-flip permutation p (exact, or Monte Carlo where marked MC); "
        + adjusted
        + "; MDD 80%: the smallest true difference this many items detect with 80% power "
        "at alpha 0.05, from the spread of the paired differences."
    )


def paired_title(analysis: Analysis) -> str:
    if analysis.pair_by is not None:
        return f"Paired comparison: each run against its own {analysis.pair_by} run"
    assert analysis.baseline is not None
    return f"Paired comparison against `{analysis.baseline.label}`"


Table = tuple[list[str], list[list[str]]]


def statistics_tables(analysis: Analysis) -> dict[str, Table | None]:
    """The paired, agreement and position-bias tables (header, rows), None where not made."""
    position = (POSITION_HEADER, position_bias_rows(analysis)) if analysis.position_bias else None
    return {
        "paired": (PAIRED_HEADER, paired_rows(analysis)) if analysis.paired else None,
        "agreement": agreement_table(analysis),
        "position": position,
    }


def paired_csv_rows(analysis: Analysis) -> list[dict[str, Any]]:
    return [
        {
            "run": label,
            "baseline": analysis.paired_with.get(label),
            "metric": name,
            **diff.to_json(),
            "p_adjusted": analysis.adjusted_p[label][name],
            "correction": analysis.correction,
        }
        for label, metrics in analysis.paired.items()
        for name, diff in metrics.items()
    ]


def agreement_table(analysis: Analysis) -> Table:
    agreement = analysis.agreement
    rows = [
        [label, *("n/a" if np.isnan(v) else f"{v:.3f}" for v in agreement.tau[i])]
        for i, label in enumerate(agreement.labels)
    ]
    return ["", *agreement.labels], rows


def agreement_csv_rows(analysis: Analysis) -> list[dict[str, Any]]:
    agreement = analysis.agreement
    return [
        {
            "": label,
            **{
                other: None if np.isnan(v) else round(float(v), 6)
                for other, v in zip(agreement.labels, agreement.tau[i], strict=True)
            },
        }
        for i, label in enumerate(agreement.labels)
    ]


def position_bias_rows(analysis: Analysis) -> list[list[str]]:
    return [
        [
            label,
            str(bias.n_calls),
            *(" / ".join(map(percent, r)) for r in (bias.rates, bias.human_rates)),
            percent(bias.uniform),
            f"{bias.p_value:.4f}",
        ]
        for label, bias in analysis.position_bias.items()
    ]


POSITION_HEADER = [
    "run",
    "joint calls",
    "model top-1 by position",
    "human first by position",
    "uniform",
    "chi-square p",
]


def position_bias_csv_rows(analysis: Analysis) -> list[dict[str, Any]]:
    return [
        {
            "run": label,
            "position": position + 1,
            "top1_rate": round(float(rate), 6),
            "human_top1_rate": round(float(human), 6),
            "uniform": round(bias.uniform, 6),
            "n_calls": bias.n_calls,
            "p_value": round(bias.p_value, 6),
        }
        for label, bias in analysis.position_bias.items()
        for position, (rate, human) in enumerate(zip(bias.rates, bias.human_rates, strict=True))
    ]


def paired_rich_table(analysis: Analysis) -> TerminalTable:
    title = paired_title(analysis).replace("`", "")
    return TerminalTable(title, PAIRED_HEADER, paired_rows(analysis))
