"""A run's folder: what a finished run's records evaluate to (`evaluate_run`, for the runner
and `harness merge` alike), what it writes there (`write_run_folder`), and the check that it
belongs to one configuration: a finished run is never silently replaced by a different one."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from harness.calls.pricing import RunCost
from harness.calls.prompting.variants import get_variant
from harness.config.experiment import ExperimentConfig
from harness.config.protocols import get_protocol, protocol_of, resolve
from harness.core.dataset import Dataset, Item
from harness.core.errors import ConfigError, HarnessError
from harness.core.files import sha256_of
from harness.core.predictions import write_predictions
from harness.core.records import Record
from harness.core.run_files import read_run_config
from harness.core.sanitize import dumps_json
from harness.core.secrets import scrub, scrub_value
from harness.core.types import ProviderConfig
from harness.reports.run_report import write_run_report
from harness.scoring.evaluation import (
    Evaluation,
    RecordsPass,
    evaluate_records,
    evaluation_options,
    expected_score_records,
)
from harness.scoring.human_ceiling import human_ceiling
from harness.scoring.metrics import Aggregate
from harness.scoring.reliability import judge_reliability
from harness.scoring.stats import position_top1_rates
from providers import provider_class

# Settings that never change a run's records or metrics: `items` (a sequential comparison's
# items so far: more items extend its run), `cache` (a seed cache) and `tracking`.
NOT_RESULTS = frozenset({"items", "cache", "tracking"})
PROVIDER_BLOCKS = frozenset({"provider", "summarizer", "user_simulator", "retriever"})


def _calls_only(block: Mapping[str, Any]) -> set[str]:
    """The settings of a provider block that never change a run's records (`CallSetting`s);
    with `endpoint_id` its base URLs too (a named pool answers the same whichever servers)."""
    try:
        options = provider_class(str(block.get("name"))).Options
    except (ConfigError, ImportError):  # a provider no longer known, or its extra not installed
        options = ProviderConfig
    marks = options.call_settings().items()
    return {key for key, mark in marks if not mark.changes_records} | (
        {"base_url"} if block.get("endpoint_id") else set()
    )


def _flatten(
    value: Any, prefix: str = "", ignored: frozenset[str] | set[str] = NOT_RESULTS
) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        return {prefix.rstrip("."): value}
    out: dict[str, Any] = {}
    for key, inner in value.items():
        if str(key) in ignored:
            continue
        block = str(key) in PROVIDER_BLOCKS and isinstance(inner, Mapping)
        out |= _flatten(inner, f"{prefix}{key}.", _calls_only(inner) if block else set())
    return out


def config_differences(previous: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """`key: old -> new` for every setting that differs and changes the results."""
    old, new = _flatten(previous), _flatten(current)
    return [
        f"{key}: {old.get(key)!r} -> {new.get(key)!r}"
        for key in sorted(old.keys() | new.keys())
        if old.get(key) != new.get(key)
    ]


def check_run_folder(out_dir: Path, config: ExperimentConfig, *, overwrite: bool = False) -> None:
    """Refuse to run `config` into `out_dir` when a finished run of another configuration is
    there (its config.yaml differs in a setting that changes the results)."""
    saved = out_dir / "config.yaml"
    if overwrite or not saved.is_file():
        return
    try:
        previous = read_run_config(saved)
    except HarnessError as exc:
        raise HarnessError(
            f"{exc} (not a readable config.yaml): move the folder away or pass --overwrite "
            "(overwrite=True in Python)"
        ) from None
    # compare scrubbed with scrubbed, and an older file's protocol as this one says it
    previous = {**previous, "protocol": protocol_of(previous).name}
    changes = config_differences(previous, scrub_value(config.model_dump(mode="json")))
    if changes:
        shown = "; ".join(changes[:4]) + (
            f"; and {len(changes) - 4} more" if len(changes) > 4 else ""
        )
        raise HarnessError(
            f"{out_dir} holds a finished run of another configuration ({shown}): give this "
            "run another name, or pass --overwrite (overwrite=True in Python) to replace it"
        )


def write_run_folder(
    out_dir: Path,
    config: ExperimentConfig,
    *,
    items: Sequence[Item],
    evaluation: Evaluation,
    metrics: Mapping[str, Any],
    stats: Mapping[str, Any],
    subset: Sequence[str] | None = None,
) -> Aggregate | None:
    """Write an evaluated run's files beside its records.jsonl: predictions.jsonl, metrics.json,
    run.json, config.yaml (scrubbed; `subset` listed as `items`) and report.md (with the
    human ceiling of annotated items, which it returns)."""
    if (out_dir / "records.jsonl").is_file():  # so that a merge can tell it is the same file
        stats = {**stats, "records_sha256": sha256_of(out_dir / "records.jsonl")}
    stats = scrub_value(dict(stats))
    write_predictions(out_dir / "predictions.jsonl", evaluation.predictions, items)
    (out_dir / "metrics.json").write_text(dumps_json(metrics, indent=2) + "\n")
    (out_dir / "run.json").write_text(scrub(dumps_json(stats, indent=2)) + "\n")
    saved = scrub_value(config.model_dump(mode="json"))
    if subset is not None:
        saved["items"] = list(subset)
    (out_dir / "config.yaml").write_text(yaml.safe_dump(saved, sort_keys=False))
    human = human_ceiling(items, n_bootstrap=config.n_bootstrap, seed=config.seed)
    shown = human.to_json() if human is not None else None
    write_run_report(out_dir / "report.md", config, metrics, stats, human=shown)
    return human


def evaluate_items(
    config: ExperimentConfig, items: Sequence[Item], records: Iterable[Record] | RecordsPass
) -> Evaluation:
    """The records' metrics under the run's settings, as a report reads them from config.yaml,
    or as a protocol with a scoring of its own scores them."""
    own = get_protocol(config.protocol).evaluate
    if own is not None:
        options = {"n_bootstrap": config.n_bootstrap, "seed": config.seed}
        evaluation: Evaluation = resolve(own)(
            config.own_options(), config.dataset, records, **options
        )
        return evaluation
    return evaluate_records(items, records, **evaluation_options(config.model_dump()))


def evaluate_run(
    config: ExperimentConfig,
    dataset: Dataset,
    records: Iterable[Record],
    *,
    parse_failures: int,
    errors: int,
    cost: RunCost | None = None,
) -> tuple[Evaluation, dict[str, Any]]:
    """A run's evaluation and its metrics.json: the metrics, the failure counts, and the
    blocks of the variant (`position_top1`), expected scores, protocol and a ranking judge's
    reliability where they apply. `records` is iterated once (adding each to `cost`), again
    only for a block needing it."""
    joint = config.kind == "judge" and get_variant(config.prompt).mode == "joint"
    ranking = config.kind == "judge" and config.protocol == "rank"  # its reliability block
    predictions = RecordsPass()
    judged: list[Record] = []  # a ranking judge's records, else a joint run's answered ones
    has_expected = False
    for record in records:
        if cost is not None:
            cost.add(record)
        has_expected = has_expected or "expected_score" in record.extra
        if ranking or (joint and record.raw is not None):
            judged.append(record)
        predictions.add(record)
    own = get_protocol(config.protocol).evaluate is not None
    evaluation = evaluate_items(config, dataset.items, records if own else predictions)
    metrics = evaluation.to_json()
    metrics["parse_failures"] = parse_failures
    metrics["errors"] = errors
    if joint:
        answered = [record for record in judged if record.raw is not None]
        metrics["position_top1"] = position_top1_rates(answered, dataset.items)
    expected = expected_score_records(list(records)) if has_expected else None
    if expected is not None:
        metrics["expected_score"] = evaluate_items(
            config, dataset.items, expected
        ).aggregate.to_json()
    options = {"n_bootstrap": config.n_bootstrap, "seed": config.seed}
    metrics |= get_protocol(config.protocol).blocks_of(dataset, records, metrics, **options)
    if ranking:
        sampled = config.provider.temperature > 0
        scores = evaluation.mean_scores()
        metrics["reliability"] = judge_reliability(
            dataset.items, judged, scores, sampled=sampled, **options
        )
    return evaluation, metrics
