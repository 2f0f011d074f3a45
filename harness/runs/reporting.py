"""`harness.report` and `harness.compare`: what `harness report` and `harness compare`
compute, as pandas DataFrames for a notebook. The commands call them, then print; they
print nothing."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.core.errors import HarnessError

if TYPE_CHECKING:
    import pandas as pd

    from harness.reports.analysis import Analysis
    from harness.reports.loading import RunData
    from harness.runs.compare.inputs import MissingChoice
    from harness.runs.compare.result import Comparison

Paths = str | Path | Sequence[str | Path]


@dataclass
class Report:
    """What `harness report` found: `runs` (comparison.csv as a DataFrame: one row per run,
    each metric's mean and CI, coverage, calls, cost; the human ceiling last), `paired`
    (paired.csv: each run's differences from its baseline, with p-values), `agreement`
    (agreement.csv), `position_bias` (position_bias.csv), the files written to `out`
    (report.md, report.html, the figures as PNG and PDF, ...) and the warnings."""

    runs: pd.DataFrame
    paired: pd.DataFrame
    agreement: pd.DataFrame
    position_bias: pd.DataFrame
    analysis: Analysis = field(repr=False)
    loaded: list[RunData] = field(repr=False)
    files: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def figures(self) -> list[Path]:
        return [path for path in self.files if path.suffix == ".png"]


class NothingToReport(HarnessError):
    """No run or predictions file could be read; `warnings` says why each was skipped."""

    def __init__(self, headline: str, warnings: list[str]) -> None:
        super().__init__(headline + "".join(f"\n  {line}" for line in warnings))
        self.headline, self.warnings = headline, warnings


def report(
    runs: Paths,
    *,
    out: str | Path | None = None,
    baseline: str | Path | None = None,
    pair_by: str | None = None,
    correction: str = "holm",
    dataset: str | Path | None = None,
    qrels: str | Path | None = None,
    html: bool = True,
    embed_audio: bool = False,
    n_permutations: int = 10000,
    seed: int = 0,
    score: str = "greedy",
) -> Report:
    """Compare finished runs (run or sweep folders, predictions files, TREC run files) as
    `harness report` does, and return its tables as pandas DataFrames (`Report`): metrics
    with bootstrap CIs per run, paired differences against `baseline` (a run) or `pair_by`
    (`"prompt=zero_shot"`: each run against the run that differs only in that setting),
    adjusted by `correction` (holm, bh, none), agreement between runs, position bias.
    The report's files (report.md, report.html, figures, CSV and LaTeX tables) are written
    to `out` when it is given. Prints nothing; what could not be read is in `.warnings`."""
    from harness.reports.analysis import analyse
    from harness.reports.paired_tables import (
        agreement_csv_rows,
        paired_csv_rows,
        position_bias_csv_rows,
    )
    from harness.reports.pairing import parse_pair_by
    from harness.reports.sources import discover, load_sources
    from harness.reports.tables import comparison_csv_rows, human_csv_rows
    from harness.reports.writing import write_report
    from harness.scoring.stats import CORRECTION_NAMES

    if correction not in CORRECTION_NAMES:
        raise HarnessError(f"--correction must be holm, bh or none, not {correction!r}")
    if score not in ("greedy", "expected"):
        raise HarnessError(f"--score must be 'greedy' or 'expected', not {score!r}")
    if baseline is not None and pair_by is not None:
        raise HarnessError("give --baseline or --pair-by, not both")
    paths = [Path(runs)] if isinstance(runs, str | Path) else [Path(p) for p in runs]
    found = discover([*paths, *([Path(baseline)] if baseline is not None else [])])
    warnings = list(found.warnings)
    if qrels is not None:
        if dataset is not None:
            raise HarnessError("give --dataset or --qrels, not both")
        if out is None:
            raise HarnessError("--qrels needs --out (the dataset it makes is written there)")
        dataset = _qrels_dataset(Path(qrels), [s.path for s in found.sources], Path(out))
    dataset = Path(dataset) if dataset is not None else None
    loaded, unread = load_sources(found.sources, dataset=dataset, score=score)  # type: ignore[arg-type]
    warnings += unread
    if not loaded:
        raise NothingToReport(
            "no finished runs (folders with metrics.json) or predictions files to report under "
            + ", ".join(map(str, paths)),
            warnings,
        )
    base = None
    if baseline is not None:
        wanted = {s.path.resolve() for s in discover([Path(baseline)]).sources}
        base = next((r for r in loaded if r.path.resolve() in wanted), None)
        if len(wanted) != 1 or base is None:
            raise HarnessError(f"--baseline {baseline}: not one readable run or predictions file")
    analysis = analyse(
        loaded,
        base,
        pair=parse_pair_by(pair_by) if pair_by is not None else None,
        correction=correction,  # type: ignore[arg-type]
        n_permutations=n_permutations,
        seed=seed,
    )
    warnings += [f"--pair-by {pair_by}: {note}" for note in analysis.notes]
    files = []
    if out is not None:
        files = write_report(
            analysis,
            Path(out),
            title=source_title(paths),
            html=html,
            embed_audio=embed_audio,
            warnings=warnings,
        )
    return Report(
        runs=_frame(comparison_csv_rows(loaded) + human_csv_rows(analysis.human)),
        paired=_frame(paired_csv_rows(analysis)),
        agreement=_frame(agreement_csv_rows(analysis)),
        position_bias=_frame(position_bias_csv_rows(analysis)),
        files=files,
        warnings=warnings,
        analysis=analysis,
        loaded=loaded,
    )


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame(rows)


def _qrels_dataset(qrels: Path, sources: Sequence[Path], out: Path) -> Path:
    """A dataset folder (OUT/qrels_dataset) from the qrels, with the documents the TREC run
    files rank."""
    from harness.core.trec import is_trec_run, read_candidates, read_qrels
    from harness.interop.qrels import write_dataset

    runs = [path for path in sources if path.is_file() and is_trec_run(path)]
    if not runs:
        raise HarnessError("--qrels goes with TREC run files; none among the runs given")
    listed: dict[str, dict[str, None]] = {}  # ordered sets: linear in the documents
    for path in runs:
        for qid, docs in read_candidates(path).items():
            listed.setdefault(qid, {}).update(dict.fromkeys(docs))
    lists = {qid: list(docs) for qid, docs in listed.items()}
    write_dataset(read_qrels(qrels), lists, out / "qrels_dataset", runs[0])
    return out / "qrels_dataset"


def source_title(paths: Sequence[Path]) -> str:
    """What a report compares, by the names of the folders and files it was given
    (`quickstart`, `quickstart, my_model`), as `harness view` titles its page."""
    names = [(p.parent if p.name == "predictions.jsonl" else p).resolve().name for p in paths]
    return ", ".join(dict.fromkeys(n for n in names if n)) or "comparison"


def compare(
    a: str | Path,
    b: str | Path,
    *,
    sequential: bool = False,
    metric: str = "hit@1",
    alpha: float = 0.05,
    margin: float | None = None,
    max_items: int | None = None,
    missing: MissingChoice = "exclude",
    budget_usd: float | None = None,
    seed: int = 0,
    batch_size: int = 50,
    finite: bool = False,
    out: str | Path | None = None,
    dataset: str | Path | None = None,
    cache_dir: str | Path | None = None,
    show_progress: bool = False,
) -> Comparison:
    """Is B better than A? As `harness compare` decides it (docs/sequential.md): a and b are
    experiment files (run through the cache, under OUT/runs), run folders or predictions
    files (with `dataset`). Returns the `Comparison`: `.steps`, the confidence sequence after
    each batch (`sequential=True`) or the fixed-sample test's one row, as a DataFrame (n, mean
    of B - A, lo, hi; calls and usd, or p_value); `.decision`, `.reason`, `.to_json()` (what
    compare.json holds), `.line()` (what the command prints). compare.json (and compare.png)
    are written to `out` if given (`.files`)."""
    from harness.calls.cache import ResponseCache
    from harness.runs.compare.engine import fixed_compare, sequential_compare, write_comparison
    from harness.runs.compare.sources import open_sources

    if not 0 < alpha < 1:
        raise HarnessError(f"--alpha must lie strictly between 0 and 1, not {alpha:g}")
    for name, value in (("--margin", margin), ("--budget-usd", budget_usd)):
        if value is not None and not (value > 0 and math.isfinite(value)):
            raise HarnessError(f"{name} must be positive and finite, not {value:g}")
    for name, given in (("--budget-usd", budget_usd), ("--finite", finite or None)):
        if given is not None and not sequential:
            raise HarnessError(f"{name} needs --sequential")
    for name, number, least in (("--batch-size", batch_size, 1), ("--seed", seed, 0)):
        if number < least:
            raise HarnessError(f"{name} must be at least {least:,}, not {number:,}")
    if max_items is not None and max_items < 1:
        raise HarnessError(f"--max-items must be at least 1, not {max_items:,}")
    folder = Path(out if out is not None else "results/compare")
    if folder.exists() and not folder.is_dir():
        raise HarnessError(f"--out {folder} is a file, not a folder")
    cache = ResponseCache(cache_dir)
    try:
        source = open_sources(
            Path(a),
            Path(b),
            metric=metric,
            dataset=Path(dataset) if dataset is not None else None,
            cache=cache,
            results_dir=folder / "runs",
            show_progress=show_progress,
        )
        common: dict[str, Any] = {"metric": metric, "alpha": alpha, "margin": margin}
        common |= {"max_items": max_items, "seed": seed, "missing": missing}
        result = (
            sequential_compare(
                source, batch_size=batch_size, budget_usd=budget_usd, finite=finite, **common
            )
            if sequential
            else fixed_compare(source, **common)
        )
    finally:
        cache.close()
    if out is not None:
        result.files = write_comparison(result, folder)
    return result
