"""A run's metrics.json reused where it is still what the records evaluate to.

`harness run` (and `harness merge`) write, beside metrics.json, `metrics_inputs.json`: what
metrics.json was computed from (the digests of records.jsonl, of the items evaluated and of
metrics.json itself, the evaluation options and the harness version). A report reads a run
again: when every one of those is unchanged, the costly part of the evaluation, the bootstrap
resamples of every confidence interval, is taken from metrics.json, and the rest (per-item
values, means, counts, rates) is recomputed through the one evaluation path
(`harness.scoring.evaluation`) with a single resample. The intervals are spliced in only
where the recomputed figures are exactly metrics.json's, so a file that does not belong to
these records is never trusted; any difference, a missing or unreadable fingerprint, or a
hand-edited metrics.json means a full re-evaluation, as before.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness._version import __version__
from harness.core.dataset import Item
from harness.core.errors import HarnessError
from harness.core.files import parse_json, read_bytes, read_json, sha256_of
from harness.core.sanitize import dumps_json
from harness.scoring.evaluation import Evaluation
from harness.scoring.metrics import Aggregate, MetricSummary

INPUTS = "metrics_inputs.json"
METRICS = "metrics.json"
RECORDS = "records.jsonl"
CHUNK = 1 << 20
# Bump when a change to the metrics moves an interval of unchanged records (the golden files
# of tests/harness/scoring/test_golden_metrics.py then change): stored intervals of earlier
# runs are not reused, even under the same harness version.
INTERVALS_VERSION = 1


def evaluation_options(config: Mapping[str, Any]) -> dict[str, Any]:
    """The evaluation options of a run, from its config.yaml (as a mapping): the keyword
    arguments of `evaluate_records` that change its result, with the run defaults."""
    metrics = config.get("metrics") or {}
    return {
        "repeats": int(config.get("repeats") or 1),
        "missing": config.get("missing", "worst"),
        "n_bootstrap": int(config.get("n_bootstrap") or 1000),
        "seed": int(config.get("seed") or 0),
        "at": tuple(metrics.get("at") or ()),
        "merge_groups": dict(metrics.get("merge_groups") or {}),
    }


def items_sha256(items: Sequence[Item]) -> str:
    """A digest of what the evaluation reads of the items, in order: each item's id, group,
    candidates and their gains."""
    digest = hashlib.sha256()
    for item in items:
        head = "\x1f".join((item.id, item.group or "", *item.candidates)) + "\x1e"
        digest.update(head.encode("utf-8", "surrogatepass"))
        digest.update(item.gains.tobytes())
    return digest.hexdigest()


def _fingerprint(
    folder: Path, metrics: bytes, items: Sequence[Item], options: Mapping[str, Any]
) -> dict[str, Any]:
    return {
        "harness_version": __version__,
        "intervals_version": INTERVALS_VERSION,
        "records_sha256": sha256_of(folder / RECORDS),
        "metrics_sha256": hashlib.sha256(metrics).hexdigest(),
        "items_sha256": items_sha256(items),
        "options": parse_json(dumps_json(dict(options)), "options"),
    }


def write_inputs(folder: Path, items: Sequence[Item], options: Mapping[str, Any]) -> None:
    """Write the fingerprint of `folder`'s records.jsonl and metrics.json (both final) for
    `items` evaluated with `options` (`evaluation_options`)."""
    metrics = read_bytes(folder / METRICS)
    fingerprint = _fingerprint(folder, metrics, items, options)
    (folder / INPUTS).write_text(dumps_json(fingerprint, indent=2) + "\n")


def stored_metrics(
    folder: Path, items: Sequence[Item], options: Mapping[str, Any]
) -> dict[str, Any] | None:
    """`folder`'s metrics.json when its fingerprint says it was computed from the folder's
    records.jsonl, these `items` and `options`, by this harness version; else None."""
    try:
        stored = read_json(folder / INPUTS)
        metrics = read_bytes(folder / METRICS)
        if stored != _fingerprint(folder, metrics, items, options):
            return None
        parsed = parse_json(metrics, folder / METRICS)
    except HarnessError:  # absent, unreadable, not JSON
        return None
    return parsed if isinstance(parsed, dict) else None


def _spliced(aggregate: Aggregate, block: Any) -> Aggregate:
    """`aggregate` with the intervals of its metrics.json `block` (KeyError/TypeError/
    ValueError where the block has not the same metrics)."""
    given = block["metrics"]
    return replace(
        aggregate,
        metrics={
            name: _interval(summary, given[name]) for name, summary in aggregate.metrics.items()
        },
    )


def _interval(summary: MetricSummary, block: Any) -> MetricSummary:
    ci = block["ci95"]
    if ci is None:  # none, or NaN written as null (`dumps_json`)
        nan = float("nan")
        return replace(summary, ci95=None if summary.ci95 is None else (nan, nan))
    low, high = ci
    return replace(summary, ci95=(float(low), float(high)))


def with_stored_intervals(evaluation: Evaluation, stored: Mapping[str, Any]) -> Evaluation | None:
    """`evaluation` (computed with any number of resamples) with the confidence intervals of
    `stored` (a metrics.json), provided that everything else it reports, as metrics.json
    holds it, is exactly `stored`'s; else None."""
    try:
        spliced = replace(
            evaluation,
            aggregate=_spliced(evaluation.aggregate, stored),
            groups={
                name: _spliced(agg, stored["groups"][name])
                for name, agg in evaluation.groups.items()
            },
            turns=[
                (turn, _spliced(agg, block))
                for (turn, agg), block in zip(
                    evaluation.turns, stored.get("turns") or [], strict=True
                )
            ],
            turn_gain={
                name: _interval(gain, stored["turn_gain"][name])
                for name, gain in evaluation.turn_gain.items()
            },
        )
    except (KeyError, TypeError, ValueError):
        return None
    produced = parse_json(dumps_json(spliced.to_json()), "metrics")
    same = all(stored.get(key) == value for key, value in produced.items())
    blocks = all(key in produced for key in ("groups", "turns", "turn_gain") if key in stored)
    return spliced if same and blocks else None
