"""Constructed run folders for the report tests: records written directly, so that the
expected statistics are known."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from harness.core.records import Record


def write_run(
    folder: Path,
    dataset: Path,
    records: Sequence[Record],
    *,
    name: str | None = None,
    provider: Mapping[str, Any] | None = None,
    prompt: str = "zero_shot",
    protocol: str = "rank",
    repeats: int = 1,
    stats: Mapping[str, Any] | None = None,
) -> Path:
    """A run folder as the runner leaves it (metrics.json is recomputed by the report)."""
    folder.mkdir(parents=True, exist_ok=True)
    config = {
        "name": name or folder.name,
        "dataset": str(dataset),
        "provider": dict(provider or {"name": "mock", "model": folder.name}),
        "prompt": prompt,
        "protocol": protocol,
        "inputs": {"dialogue": "full", "music": "audio"},
        "repeats": repeats,
        "missing": "worst",
        "seed": 0,
        "n_bootstrap": 200,
    }
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    (folder / "records.jsonl").write_text(
        "".join(r.model_dump_json(exclude_defaults=True) + "\n" for r in records)
    )
    (folder / "metrics.json").write_text("{}\n")
    run_stats = {"calls": len(records), "input_tokens": 10, "output_tokens": 2, **(stats or {})}
    (folder / "run.json").write_text(json.dumps(run_stats))
    return folder


def pointwise_records(
    scores: Mapping[str, Mapping[str, float | None]],
    *,
    repeat: int = 0,
    raw: Mapping[str, str] | None = None,
) -> list[Record]:
    """One judge record per (item, candidate); `raw` overrides the answer text per candidate."""
    records = []
    for item_id, by_candidate in scores.items():
        for cid, score in by_candidate.items():
            text = (raw or {}).get(cid, json.dumps({"score": score}))
            records.append(
                Record(
                    item_id=item_id,
                    candidates=[cid],
                    repeat=repeat,
                    raw=text,
                    scores={cid: score},
                    parse_error=None if score is not None else "not_json: constructed",
                )
            )
    return records


def tiny_scores(
    n_items: int, n_candidates: int = 4, *, reverse: bool = False
) -> dict[str, dict[str, float | None]]:
    """Scores for `write_tiny_dataset` items: c<i>_0 is the human's first, so ascending j
    means agreeing with the human exactly (or exactly reversed with `reverse`)."""
    out: dict[str, dict[str, float | None]] = {}
    for i in range(n_items):
        out[f"d{i}"] = {
            f"c{i}_{j}": float(j if reverse else n_candidates - j) for j in range(n_candidates)
        }
    return out
