"""A run's folder: what a finished run writes there (`write_run_folder`), and the check that
it belongs to one configuration: re-running under the same name with settings that change
the results is refused (unless the user asks to overwrite), so a finished run is never
silently replaced by a different one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from harness.config import ExperimentConfig
from harness.dataset import Item
from harness.errors import HarnessError
from harness.records import Predictions, write_predictions
from harness.report.run_report import write_run_report
from harness.sanitize import dumps_json
from harness.secrets import scrub, scrub_value
from harness.types import NON_IDENTITY_FIELDS
from providers.batch import BATCH_KEYS

# Settings that change how a run goes or how it is shown, never its records or metrics: those
# kept out of the cache key, except `reask` (it decides how many answers stay unparsable).
NOT_RESULTS = (NON_IDENTITY_FIELDS - {"reask"}) | BATCH_KEYS
# ... and `items`, the items a sequential comparison has asked so far: it grows batch by batch
# (`harness compare --sequential`), and more items of one configuration extend its run.
NOT_RESULTS |= {"items"}


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, inner in value.items():
            if str(key) not in NOT_RESULTS:
                out |= _flatten(inner, f"{prefix}{key}.")
        return out
    return {prefix.rstrip("."): value}


def config_differences(previous: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """`key: old -> new` for every setting that differs and changes the results (where a
    run is logged, `tracking:`, does not)."""
    old, new = _flatten(previous), _flatten(current)
    for flat in (old, new):
        for key in [k for k in flat if k == "tracking" or k.startswith("tracking.")]:
            del flat[key]
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
        previous = yaml.safe_load(saved.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError):
        previous = None
    if not isinstance(previous, Mapping):
        raise HarnessError(
            f"{saved}: not a readable config.yaml; move the folder away or pass --overwrite "
            "(overwrite=True in Python)"
        )
    # config.yaml is written scrubbed (a key in a base URL): compare like with like
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
    predictions: Predictions,
    metrics: Mapping[str, Any],
    stats: Mapping[str, Any],
    human: Mapping[str, Any] | None = None,
    subset: Sequence[str] | None = None,
) -> None:
    """Write an evaluated run's files beside its records.jsonl: predictions.jsonl,
    metrics.json, run.json (counts, cost, provenance), config.yaml and report.md. run.json
    and config.yaml are scrubbed (a key in a base URL). `subset`: the items of a run on part
    of its dataset (a sequential comparison's), listed in config.yaml as `items`."""
    write_predictions(out_dir / "predictions.jsonl", predictions, items)
    (out_dir / "metrics.json").write_text(dumps_json(metrics, indent=2) + "\n")
    (out_dir / "run.json").write_text(scrub(dumps_json(stats, indent=2)) + "\n")
    saved = scrub_value(config.model_dump(mode="json"))
    if subset is not None:
        saved["items"] = list(subset)
    (out_dir / "config.yaml").write_text(yaml.safe_dump(saved, sort_keys=False))
    write_run_report(out_dir / "report.md", config, metrics, stats, human=human)
