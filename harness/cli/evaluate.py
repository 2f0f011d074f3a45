"""`harness evaluate`: the metrics of a predictions file (`harness.runs.api.evaluation`)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Annotated, Literal

import typer

from harness.cli.common import check_range, console, user_errors, warn
from harness.core.errors import HarnessError
from harness.core.locking import make_folder
from harness.core.sanitize import dumps_json

MUSIC_CRS = "music-crs: "  # the options of `--protocol music-crs` (docs/protocols/music_crs.md)


@user_errors
def evaluate(
    predictions_file: Annotated[
        Path | None,
        typer.Argument(
            metavar="PREDICTIONS",
            help="Predictions JSONL ({item_id, scores or ranking, [repeat]} per line), a TREC "
            "run file (QID Q0 DOCNO RANK SCORE TAG), or a protocol's own file (--protocol).",
            show_default=False,
        ),
    ] = None,
    predictions: Annotated[
        Path | None, typer.Option(help="The predictions (the argument's older spelling).")
    ] = None,
    dataset: Annotated[
        str | None,
        typer.Option(
            help="Dataset folder (items.jsonl, clips.jsonl), or a Hugging Face dataset: "
            "hf://OWNER/NAME[@REVISION], a save_to_disk folder, Parquet files (see --columns); "
            "with --protocol music-crs the ground truth or the sessions (none: a blind set)."
        ),
    ] = None,
    protocol: Annotated[
        str, typer.Option(help="rank, or a protocol with a scoring of its own: music-crs.")
    ] = "rank",
    catalog_size: Annotated[
        int | None, typer.Option(help=MUSIC_CRS + "the catalog's size [default: 47071].")
    ] = None,
    catalog: Annotated[
        Path | None,
        typer.Option(help=MUSIC_CRS + "the catalog's track ids (JSON list, or one per line)."),
    ] = None,
    official: Annotated[
        bool,
        typer.Option("--official", help=MUSIC_CRS + "score as the organisers' evaluator does."),
    ] = False,
    judge_score: Annotated[
        float | None, typer.Option(help=MUSIC_CRS + "a judge score (1-5), for the composite.")
    ] = None,
    columns: Annotated[
        str | None,
        typer.Option(
            help="Column mapping of a Hugging Face dataset, as in an experiment file's "
            "columns: block, in YAML: '{items: {id: name, relevant: gold}}'."
        ),
    ] = None,
    qrels: Annotated[
        Path | None,
        typer.Option(
            help="TREC qrels instead of --dataset: each query of the run is an item, the "
            "documents it ranks are the candidates."
        ),
    ] = None,
    missing: Annotated[
        Literal["worst", "exclude"], typer.Option(help="Missing-score policy.")
    ] = "worst",
    out: Annotated[
        Path | None,
        typer.Option(
            help="Write the metrics JSON here (--protocol music-crs: a folder, for metrics.json "
            "and the config.yaml `harness export trec` reads)."
        ),
    ] = None,
    n_bootstrap: Annotated[int, typer.Option(help="Bootstrap resamples for the CIs.")] = 1000,
    seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 0,
    check_audio: Annotated[
        bool, typer.Option(help="Check that every clip's audio file is readable.")
    ] = False,
    at: Annotated[
        str | None,
        typer.Option(help="Cut-offs K of hit@K, recall@K, precision@K, ndcg@K, e.g. 1,5,10,20."),
    ] = None,
) -> None:
    """Compute Hit@1, MRR, nDCG and Kendall's tau-b (tie-aware, with bootstrap CIs), and the
    @K metrics with --at, from a predictions file (scores or rankings per item) against the
    dataset's relevance; per item group too when the items carry groups. `--protocol
    music-crs`: a RecSys Challenge 2026 Music-CRS submission's nDCG@1/10/20 (per turn too),
    catalog and lexical diversity, and the composite with --judge-score."""
    from harness.reports.formatting import rich_table
    from harness.runs import api
    from harness.scoring.evaluation import CoverageWarning
    from harness.scoring.metrics import MAX_BOOTSTRAP

    if (predictions_file is None) == (predictions is None):
        raise HarnessError("give the predictions file (as the argument, or --predictions)")
    path: Path = predictions_file or predictions  # type: ignore[assignment]
    check_range("--n-bootstrap", n_bootstrap, 10, MAX_BOOTSTRAP)
    check_range("--seed", seed, 0)
    given = {"catalog_size": catalog_size, "catalog": catalog, "judge": judge_score}
    options = {k: v for k, v in given.items() if v is not None} | (
        {"official": True} if official else {}
    )
    folder = protocol != "rank"  # a protocol's own scoring writes a folder
    if out is not None and out.is_dir() and not folder:
        raise HarnessError(f"--out {out} is a folder: give the path of the metrics file")
    if out is not None:
        make_folder(out if folder else out.parent, "--out")  # refused before the work
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CoverageWarning)
        metrics = api.evaluation(
            dataset, path, qrels=qrels, columns=columns, check_audio=check_audio,
            missing=missing, n_bootstrap=n_bootstrap, seed=seed, at=_cutoffs(at),
            protocol=protocol, options=options,
        ).to_json()  # fmt: skip
    console.print(rich_table(str(path), [(path.stem, metrics)]))
    if folder:  # its sections (by turn); the registry is not imported for a plain file
        from harness.reports.protocol_tables import protocol_sections

        for section in protocol_sections([(path.stem, metrics)]):
            console.print("\n".join(section.markdown()), highlight=False)
    for warning in caught:  # a coverage warning as a line of the command's output
        if not issubclass(warning.category, CoverageWarning):
            warnings.showwarning(
                warning.message, warning.category, warning.filename, warning.lineno
            )
    lines = [str(w.message) for w in caught if issubclass(w.category, CoverageWarning)]
    warn([*lines, *(metrics.get("validation") or ())])  # and what --official let through
    if out and folder:  # with what `harness export trec` reads back
        import yaml

        block = {k: str(v) if isinstance(v, Path) else v for k, v in options.items()}
        setup = {
            "protocol": protocol,
            "dataset": dataset,
            protocol: {"predictions": str(path), **block},
        }
        (out / "config.yaml").write_text(yaml.safe_dump(setup, sort_keys=False))
    if out:
        (out / "metrics.json" if folder else out).write_text(dumps_json(metrics, indent=2) + "\n")


def _cutoffs(at: str | None) -> tuple[int, ...]:
    try:
        return tuple(int(k) for k in at.split(",")) if at else ()
    except ValueError:
        raise HarnessError(f"--at takes cut-offs such as 1,5,10,20, not {at!r}") from None
