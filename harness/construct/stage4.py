"""Stage 4: consensus rankings from the annotators, and agreement-based filtering."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from harness.construct.files import MARKER, link_or_copy, prepare_out_dir, write_json
from harness.core.dataset import load_dataset
from harness.core.errors import HarnessError
from harness.core.files import read_jsonl, sha256_of, write_jsonl
from harness.core.paths import contained
from harness.scoring.consensus import Ranking, borda_points, consensus, positions


class Stage4Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    min_w: float = Field(default=0.25, ge=0.0, le=1.0)
    drop_bottom: float = Field(default=0.10, ge=0.0, lt=1.0)
    min_annotators: int = Field(default=2, ge=2)


def kendall_w(rankings: Sequence[Ranking], candidates: Sequence[str]) -> float:
    """Kendall's W = 12 S / (m^2 (n^3 - n)), S the squared deviations of the rank sums from
    their mean m (n + 1) / 2. Complete rankings have no ties, so no tie correction applies."""
    m, n = len(rankings), len(candidates)
    if m < 2 or n < 2:
        raise ValueError("Kendall's W needs at least two annotators and two candidates")
    sums = [sum(r) for r in positions(rankings, candidates).values()]
    mean = m * (n + 1) / 2
    s = sum((x - mean) ** 2 for x in sums)
    return 12 * s / (m**2 * (n**3 - n))


def w_summary(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"count": 0}
    return {
        "count": len(values),
        "mean": round(statistics.fmean(values), 4),
        "median": round(statistics.median(values), 4),
        "share_w_ge_0.5": round(sum(w >= 0.5 for w in values) / len(values), 4),
    }


def aggregate(
    items: list[dict[str, Any]], config: Stage4Config
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Items with consensus `human_ranking`, `kendall_w` and `borda`; and the report."""
    scored: list[tuple[dict[str, Any], float]] = []
    too_few = []
    for item in items:
        rankings = item.get("annotations") or []
        if len(rankings) < config.min_annotators:
            too_few.append(item["id"])
            continue
        candidates = item["candidates"]
        w = kendall_w(rankings, candidates)
        ranking = consensus(rankings, candidates)
        points = borda_points(rankings, candidates)
        out = {
            **item,
            "human_ranking": ranking,
            "borda": {c: points[c] for c in ranking},
            "kendall_w": round(w, 6),
        }
        scored.append((out, w))
    if not scored:
        raise HarnessError(f"no item has rankings from {config.min_annotators} or more annotators")
    low = {item["id"] for item, w in scored if w < config.min_w}
    n_bottom = math.floor(config.drop_bottom * len(scored))
    by_w = sorted(scored, key=lambda pair: (pair[1], pair[0]["id"]))
    bottom = {item["id"] for item, _ in by_w[:n_bottom]}
    kept = [item for item, _ in scored if item["id"] not in low | bottom]
    retrieval_agrees = [
        item["human_ranking"][0] == item["retrieval"]["top1"]
        for item in kept
        if isinstance(item.get("retrieval"), dict) and "top1" in item["retrieval"]
    ]
    report = {
        "n_items": len(items),
        "n_too_few_annotations": len(too_few),
        "n_annotated": len(scored),
        "dropped_w_below_min": len(low),
        "dropped_bottom_share": len(bottom - low),
        "n_kept": len(kept),
        "annotators_per_item": {
            str(n): count
            for n, count in sorted(Counter(len(i.get("annotations") or []) for i in items).items())
        },
        "w_before_filtering": w_summary([w for _, w in scored]),
        "w_after_filtering": w_summary([item["kendall_w"] for item in kept]),
        "consensus_top1_is_retrieval_top1": (
            round(sum(retrieval_agrees) / len(retrieval_agrees), 4) if retrieval_agrees else None
        ),
        "config": config.model_dump(),
    }
    return kept, report


def run_stage4(
    dataset_dir: Path, out_dir: Path, config: Stage4Config | None = None, *, overwrite: bool = False
) -> dict[str, Any]:
    """Aggregate the `annotations` of `dataset_dir` into a final dataset folder `out_dir`."""
    config = config or Stage4Config()
    dataset = load_dataset(dataset_dir)  # validates every annotation is a permutation
    if out_dir.resolve() == dataset_dir.resolve():
        raise HarnessError("stage 4 writes a new dataset folder: --out must differ from the input")
    items = [obj for _, obj in read_jsonl(dataset_dir / "items.jsonl")]
    kept, report = aggregate(items, config)
    used = {cid for item in kept for cid in item["candidates"]}
    clips = [obj for _, obj in read_jsonl(dataset_dir / "clips.jsonl") if obj["id"] in used]
    prepare_out_dir(out_dir, overwrite=overwrite)
    for clip in clips:
        target = contained(out_dir, clip["audio"])  # load_dataset checked it
        link_or_copy(dataset.clips[clip["id"]].path, target)
    write_jsonl(out_dir / "clips.jsonl", clips)
    write_jsonl(out_dir / "items.jsonl", kept)
    report["input_items_sha256"] = sha256_of(dataset_dir / "items.jsonl")
    load_dataset(out_dir)
    write_json(out_dir / MARKER, report)
    return report
