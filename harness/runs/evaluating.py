"""`harness.evaluate` and the `harness evaluate` command's `evaluation`: metrics of predictions
(a file, a mapping, prediction lines, a TREC run) against a dataset folder, a Hugging Face dataset
or qrels, through the one evaluation path. Nothing of a run is imported here."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import wraps
from pathlib import Path
from typing import Any, ParamSpec, TypeAlias

from harness.core.dataset import Dataset, Item, load_dataset
from harness.core.errors import HarnessError
from harness.core.predictions import Predictions, read_predictions, scores_from_ranking
from harness.scoring.evaluation import (
    CoverageWarning,
    Evaluation,
    coverage_warnings,
    evaluate_predictions,
)
from harness.scoring.metrics import Aggregate, MissingPolicy

Scores: TypeAlias = Mapping[str, float | None]
PredictionsGiven: TypeAlias = str | Path | Mapping[str, Scores] | Iterable[Mapping[str, Any]]
P = ParamSpec("P")


def evaluation(
    dataset: str | Path | Dataset | None,
    predictions: PredictionsGiven,
    *,
    qrels: str | Path | None = None,
    columns: str | None = None,
    check_audio: bool = False,
    missing: MissingPolicy = "worst",
    n_bootstrap: int = 1000,
    seed: int = 0,
    at: Sequence[int] = (),
    protocol: str = "rank",
    options: Mapping[str, Any] | None = None,
) -> Evaluation:
    """`evaluate`'s whole evaluation (what `harness evaluate` writes): the aggregate with each
    item group's, or the protocol's (`.to_json()`: metrics.json)."""
    if protocol != "rank" or options:
        return _own_scoring(
            protocol, dataset, predictions, columns, options or {}, n_bootstrap, seed
        )
    items = _items(dataset, predictions, qrels, columns, check_audio)
    given = _as_predictions(predictions, items)
    result = evaluate_predictions(
        items, given, missing=missing, n_bootstrap=n_bootstrap, seed=seed, at=at
    )
    for line in coverage_warnings(items, given, result.aggregate):
        warnings.warn(line, CoverageWarning, stacklevel=3)  # the caller of harness.evaluate
    return result


def _aggregate_of(whole: Callable[P, Evaluation]) -> Callable[P, Aggregate]:
    @wraps(whole)
    def evaluate(*args: P.args, **kwargs: P.kwargs) -> Aggregate:
        return whole(*args, **kwargs).aggregate

    evaluate.__name__ = evaluate.__qualname__ = "evaluate"
    evaluate.__doc__ = EVALUATE_DOC
    return evaluate


EVALUATE_DOC = """Metrics of your own predictions as `harness evaluate` computes them (and a run):
    Hit@1, MRR, nDCG and Kendall's tau-b with bootstrap CIs, and the @K metrics of each K of
    `at`; the parameters are `evaluation`'s.

    `dataset`: a dataset folder, a Hugging Face dataset (`columns`: its column mapping, in
    YAML) or a `Dataset`; or None with TREC `qrels` (the items are its queries, their
    candidates the documents the run file ranks). `predictions`: a predictions JSONL or TREC
    run file, `{item_id: {candidate_id: score}}`, or a list of `{"item_id", "scores" or
    "ranking", "repeat"}` lines. Predictions that leave items or candidates without a score
    warn (`CoverageWarning`), saying how they were counted. Returns the aggregate
    (`.to_json()`: the metrics.json form; `.per_item`: the per-item values).

    `protocol`: one with a scoring of its own scores its own predictions file against
    `dataset` in its own form (a file, a folder, a Hugging Face dataset; None: the file alone),
    with its `options` (music-crs: `catalog_size`, `catalog`, `official`, `judge`;
    docs/protocols/music_crs.md)."""
evaluate = _aggregate_of(evaluation)


def _own_scoring(
    protocol: str,
    dataset: str | Path | Dataset | None,
    predictions: PredictionsGiven,
    columns: str | None,
    options: Mapping[str, Any],
    n_bootstrap: int,
    seed: int,
) -> Evaluation:
    """The scoring of a protocol of its own (`harness.config.protocols`) of its predictions."""
    from harness.config.protocols import PROTOCOLS, get_protocol, own_options, resolve
    from harness.interop.inputs import dataset_folder

    entry = get_protocol(protocol)
    own = ", ".join(name for name, p in PROTOCOLS.items() if p.evaluate is not None)
    if entry.evaluate is None or not isinstance(predictions, str | Path):
        raise HarnessError(f"--protocol {protocol}: rank, or one scoring a file of its own: {own}")
    if isinstance(dataset, Dataset):
        raise HarnessError(f"protocol {protocol} reads its own dataset form, not a Dataset")
    try:
        settings = own_options(protocol, {protocol: {"predictions": predictions, **options}})
    except ValueError as exc:
        raise HarnessError(str(exc)) from None
    path = None if dataset is None else dataset_folder(str(dataset), columns, entry.dataset_file)
    scored: Evaluation = resolve(entry.evaluate)(
        settings, path, (), n_bootstrap=n_bootstrap, seed=seed
    )
    return scored


def _items(
    dataset: str | Path | Dataset | None,
    predictions: PredictionsGiven,
    qrels: str | Path | None,
    columns: str | None,
    check_audio: bool,
) -> Sequence[Item]:
    from harness.interop.inputs import dataset_folder, qrels_items

    if (dataset is None) == (qrels is None):
        raise HarnessError("give --dataset DIR or --qrels FILE (with a TREC run file)")
    if qrels is not None:
        if not isinstance(predictions, str | Path):
            raise HarnessError("qrels go with a TREC run file, not predictions in memory")
        return qrels_items(Path(qrels), Path(predictions))
    if not isinstance(dataset, Dataset):
        dataset = load_dataset(dataset_folder(str(dataset), columns), check_audio=check_audio)
    dataset.check_judged()
    return dataset.items


def _as_predictions(predictions: PredictionsGiven, items: Sequence[Item]) -> Predictions:
    if isinstance(predictions, str | Path):
        return read_predictions(Path(predictions), items)
    if isinstance(predictions, Mapping):
        return {0: {str(k): dict(v) for k, v in predictions.items()}}
    if isinstance(predictions, Iterable):
        candidates = {item.id: item.candidates for item in items}
        out: dict[int, dict[str, Mapping[str, float | None]]] = {}
        for line in predictions:
            if not isinstance(line, Mapping) or "item_id" not in line:
                raise HarnessError("each prediction must be a mapping with item_id and scores")
            scores = line.get("scores")
            if scores is None and "ranking" in line:
                if line["item_id"] not in candidates:
                    raise HarnessError(f"prediction for unknown item {line['item_id']!r}")
                scores = scores_from_ranking(line["ranking"], candidates[line["item_id"]])
            out.setdefault(int(line.get("repeat", 0)), {})[line["item_id"]] = dict(scores or {})
        return out
    raise HarnessError(f"predictions must be a file, a mapping or a list, not {predictions!r}")
