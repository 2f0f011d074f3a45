"""Which run each run is compared with in the paired statistics: one `--baseline` for all,
or `--pair-by prompt=zero_shot`: each run against the run that differs from it only in that
setting (its own model's zero-shot run), which is what a prompting ablation asks."""

from __future__ import annotations

from collections.abc import Sequence

from harness.core.errors import HarnessError
from harness.reports.loading import RunData

PAIR_FIELDS = ("prompt", "dialogue", "music", "model", "provider")


def parse_pair_by(spec: str) -> tuple[str, str]:
    """`prompt=zero_shot` -> ("prompt", "zero_shot")."""
    field, sep, value = spec.partition("=")
    field, value = field.strip(), value.strip()
    if not sep or not value or field not in PAIR_FIELDS:
        raise HarnessError(
            f"--pair-by {spec!r}: expected FIELD=VALUE with FIELD one of {', '.join(PAIR_FIELDS)}"
            " (e.g. prompt=zero_shot)"
        )
    return field, value


def setting(run: RunData, field: str) -> str:
    inputs = run.config.get("inputs") or {}
    values = {
        "prompt": run.prompt,
        "dialogue": str(inputs.get("dialogue", "n/a")),
        "music": str(inputs.get("music", "n/a")),
        "model": str(run.provider.get("model") or "default"),
        "provider": str(run.provider.get("name", "?")),
    }
    return values[field]


def _setup(run: RunData, without: str) -> tuple[str, ...]:
    label = str(run.provider.get("label") or "")
    return (run.kind, label, *(setting(run, f) for f in PAIR_FIELDS if f != without))


def pair_by(
    runs: Sequence[RunData], field: str, value: str
) -> tuple[list[tuple[RunData, RunData]], list[str]]:
    """(run, its baseline) for each run whose `field` is not `value`, the baseline being the
    run with the same setup but `field` = `value` (from the same folder where there are
    several); and a note for each run that has none."""
    baselines: dict[tuple[str, ...], list[RunData]] = {}
    for run in runs:
        if setting(run, field) == value:
            baselines.setdefault(_setup(run, field), []).append(run)
    pairs, unmatched = [], []
    for run in runs:
        if setting(run, field) == value:
            continue
        found = baselines.get(_setup(run, field), [])
        near = [b for b in found if b.path.parent == run.path.parent]
        if not found:
            unmatched.append(
                f"{run.label}: no run with {field}={value} and otherwise the same setup"
            )
            continue
        pairs.append((run, (near or found)[0]))
    return pairs, unmatched
