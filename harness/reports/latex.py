"""LaTeX tables for a paper (booktabs): `comparison.tex`, one row per run with each metric's
mean and 95% CI, the best mean of each column in bold; and `pivot.tex`, models x prompts
with a column group per prompt. Each file is a `table` environment to `\\input`."""

from __future__ import annotations

from collections.abc import Sequence

from harness.reports.loading import RunData
from harness.reports.pivot import build_pivot
from harness.scoring import registry
from harness.scoring.metrics import MetricSummary

_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "†": r"$^\dagger$",
    "…": r"\ldots{}",
    "·": r"$\cdot$",
}
PREAMBLE = "% needs \\usepackage{booktabs}; written by harness report\n"


def escape(text: str) -> str:
    return "".join(_SPECIAL.get(ch, ch) for ch in text)


def _number(value: float) -> str:
    return f"{value:.3f}".replace("-", "$-$")  # a minus sign, not a hyphen


def _cell(summary: MetricSummary | None, best: float | None) -> str:
    if summary is None or summary.mean is None:
        return "--"
    mean = _number(summary.mean)
    if best is not None and round(summary.mean, 3) == round(best, 3):
        mean = f"\\textbf{{{mean}}}"
    if summary.ci95 is None:
        return mean
    low, high = summary.ci95
    return f"{mean} {{\\scriptsize [{_number(low)}, {_number(high)}]}}"


def _best(name: str, summaries: Sequence[MetricSummary | None]) -> float | None:
    means = [s.mean for s in summaries if s is not None and s.mean is not None]
    metric = registry.find(name)
    lower = metric is not None and not metric.higher_is_better
    return (min(means) if lower else max(means)) if means else None


def _table(columns: str, header: list[str], body: list[str], caption: str, label: str) -> str:
    return (
        PREAMBLE
        + "\\begin{table}[t]\n\\centering\n\\small\n"
        + f"\\caption{{{caption}}}\n\\label{{{label}}}\n"
        + f"\\begin{{tabular}}{{{columns}}}\n\\toprule\n"
        + "\n".join(header)
        + "\n\\midrule\n"
        + "\n".join(body)
        + "\n\\bottomrule\n\\end{tabular}\n\\end{table}\n"
    )


def comparison_tex(runs: Sequence[RunData], *, marks: Sequence[str] = ()) -> str:
    """One row per run: the metrics with 95% CIs (best mean per column in bold) and
    coverage. `marks[i]` is appended to run i's label (e.g. a dagger)."""
    marks = list(marks) or [""] * len(runs)
    names = registry.names("ranking")
    best = {m: _best(m, [run.aggregate.metrics.get(m) for run in runs]) for m in names}
    header = " & ".join(["Run", *map(registry.label, names), "Coverage"])
    body = []
    for run, mark in zip(runs, marks, strict=True):
        cells = [_cell(run.aggregate.metrics.get(m), best[m]) for m in names]
        coverage = f"{100 * run.aggregate.coverage:.1f}\\%"
        body.append(" & ".join([escape(run.label + mark), *cells, coverage]) + " \\\\")
    caption = "Means over items with 95\\% percentile-bootstrap CIs; best mean per column in bold."
    columns = "l" + "c" * len(names) + "r"
    return _table(columns, [header + " \\\\"], body, caption, "tab:comparison")


def pivot_tex(runs: Sequence[RunData]) -> str | None:
    """Models x prompts: a column group per prompt with every metric; None when the runs
    use fewer than two prompts."""
    pivot = build_pivot(runs)
    if pivot is None:
        return None
    names = registry.names("ranking")
    width = len(names)
    groups = " & ".join(
        f"\\multicolumn{{{width}}}{{c}}{{{escape(prompt)}}}" for prompt in pivot.prompts
    )
    rules = " ".join(
        f"\\cmidrule(lr){{{2 + i * width}-{1 + (i + 1) * width}}}"
        for i in range(len(pivot.prompts))
    )
    metrics = " & ".join(map(registry.label, names))
    header = [
        f" & {groups} \\\\",
        rules,
        "Model & " + " & ".join([metrics] * len(pivot.prompts)) + " \\\\",
    ]
    best = {
        (prompt, m): _best(
            m,
            [
                run.aggregate.metrics.get(m)
                for row in pivot.rows
                if (run := pivot.cells.get((row, prompt))) is not None
            ],
        )
        for prompt in pivot.prompts
        for m in names
    }
    body = []
    for row in pivot.rows:
        cells = []
        for prompt in pivot.prompts:
            run = pivot.cells.get((row, prompt))
            for m in names:
                summary = run.aggregate.metrics.get(m) if run is not None else None
                cells.append(_cell(summary, best[(prompt, m)]))
        body.append(" & ".join([escape(row), *cells]) + " \\\\")
    caption = (
        "Models by prompt: means over items with 95\\% percentile-bootstrap CIs; "
        "best mean per column in bold."
    )
    columns = "l" + "c" * (width * len(pivot.prompts))
    return _table(columns, header, body, caption, "tab:pivot")
