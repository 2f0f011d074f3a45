"""Experiment tracking: one tracker run per harness run (`tracking:` in the experiment file),
grouped by its sweep, with the run's settings, provenance, metrics with their CIs, cost and
report files; a run that fails or is interrupted is marked so."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal, Protocol, TypeGuard

from harness.config.blocks import TrackingOptions
from harness.core.errors import HarnessError
from harness.core.secrets import scrub

Status = Literal["finished", "incomplete", "failed", "interrupted"]
REPORT_FILES = ("metrics.json", "run.json", "config.yaml", "report.md", "predictions.jsonl")


class Tracker(Protocol):
    def log(self, folder: Path) -> None:
        """Log the finished run folder: metrics, provenance, cost, report files."""

    def finish(self, status: Status, reason: str | None = None) -> None: ...


def _number(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def flatten(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """`a.b.c` keys of nested mappings (lists kept as JSON text)."""
    if isinstance(value, Mapping):
        for key, inner in value.items():
            yield from flatten(inner, f"{prefix}{key}.")
    elif isinstance(value, list | tuple):
        yield prefix.rstrip("."), json.dumps(value)
    else:
        yield prefix.rstrip("."), value


def metric_values(metrics: Mapping[str, Any]) -> dict[str, float]:
    """metrics.json as numbers: `ndcg`, `ndcg.ci_low`, `ndcg.ci_high` (its 95% CI), `ndcg.std`
    (across repeats), ... plus coverage and tie rate, and `group/NAME/ndcg` per item group."""
    out: dict[str, float] = {}

    def add(block: Mapping[str, Any], prefix: str) -> None:
        for name, summary in (block.get("metrics") or {}).items():
            if not isinstance(summary, Mapping):
                continue
            ci = summary.get("ci95") or [None, None]
            fields = {"": summary.get("mean"), ".ci_low": ci[0], ".ci_high": ci[1]}
            fields[".std"] = summary.get("std")
            out.update({prefix + name + k: float(v) for k, v in fields.items() if _number(v)})
        for field in ("coverage", "tie_rate", "tie_rate_ranking", "parse_failures", "errors"):
            if _number(value := block.get(field)):
                out[prefix + field] = float(value)

    add(metrics, "")
    for group, block in (metrics.get("groups") or {}).items():
        if isinstance(block, Mapping):
            add(block, f"group/{group}/")
    return out


def cost_values(run_json: Mapping[str, Any]) -> dict[str, float]:
    """The run's cost figures (USD) and token counts from run.json."""
    out: dict[str, float] = {}
    for block in ("cost", "summaries_cost"):
        flat = flatten(run_json.get(block) or {}, f"{block}.")
        out |= {key: float(value) for key, value in flat if _number(value)}
    for key in ("calls", "model_calls", "cache_hits", "input_tokens", "output_tokens", "wall_s"):
        if _number(value := run_json.get(key)):
            out[f"run.{key}"] = float(value)
    return out


def logged_before(folder: Path, tracking: Any) -> bool:
    """Whether `folder` holds a finished run whose config.yaml names the trackers `tracking`
    (the config.yaml form of the block): that run was logged to them."""
    from harness.core.run_files import read_run_config

    if tracking is None or not (folder / "metrics.json").is_file():
        return False
    try:
        return bool(read_run_config(folder / "config.yaml").get("tracking") == tracking)
    except HarnessError:
        return False


def open_trackers(
    options: TrackingOptions | None, config: Mapping[str, Any], results_dir: Path
) -> list[Tracker]:
    """A started tracker run for each tracker `options` names, for the run of `config`
    (its config.yaml form), writing under `results_dir` by default; a tracker that cannot
    start is one HarnessError line, before anything is paid."""
    if options is None:
        return []
    trackers: list[Tracker] = []
    try:
        if options.wandb is not None:
            from harness.interop.tracking.wandb_tracker import WandbTracker

            trackers.append(WandbTracker(options.wandb, config, results_dir))
        if options.mlflow is not None:
            from harness.interop.tracking.mlflow_tracker import MlflowTracker

            uri = options.mlflow.tracking_uri or str(results_dir / "mlruns")
            trackers.append(MlflowTracker(uri, options.mlflow.experiment, config))
    except HarnessError:
        raise
    except Exception as exc:  # the tracker's library: any error of its own
        which = "mlflow" if trackers or options.wandb is None else "wandb"
        settle(trackers, "failed", reason="another tracker could not start")
        raise HarnessError(f"tracking: {which} cannot start ({_reason(exc)})") from None
    return trackers


def settle(
    trackers: list[Tracker], status: Status, folder: Path | None = None, reason: str | None = None
) -> list[str]:
    """Log the finished run `folder` (when given) to each tracker and mark it `status`;
    whatever a tracker cannot do then is a warning line, never an exception: the run is paid
    and its results stay where they are."""
    warnings = []
    for tracker in trackers:
        try:
            if folder is not None:
                tracker.log(folder)
            tracker.finish(status, reason)
        except Exception as exc:  # the tracker's library: any error of its own
            name = type(tracker).__name__.removesuffix("Tracker").lower()
            where = f"; the run's results are in {folder}" if folder is not None else ""
            warnings.append(f"tracking: {name} could not log the run ({_reason(exc)}){where}")
    return warnings


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return scrub(text)[:300]
