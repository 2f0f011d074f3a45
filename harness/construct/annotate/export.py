"""Rankings from the annotation database into a copy of the dataset, for stage 4."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.construct.annotate.store import RankingStore
from harness.construct.files import link_or_copy
from harness.core.dataset import load_dataset
from harness.core.errors import DatasetError, HarnessError
from harness.core.files import read_jsonl, write_jsonl
from harness.core.paths import UnsafePath, contained


def export_annotations(dataset_dir: Path, store: RankingStore, out_dir: Path) -> dict[str, Any]:
    """Write the dataset with the stored rankings to `out_dir`; returns counts."""
    if out_dir.resolve() == dataset_dir.resolve():
        raise HarnessError(
            f"--out {out_dir}: give a new folder; the dataset's items.jsonl is never rewritten"
        )
    path = dataset_dir / "items.jsonl"
    by_item: dict[str, dict[str, list[str]]] = {}
    for stored in store.all():
        by_item.setdefault(stored.item_id, {})[stored.annotator] = list(stored.ranking)
    rows = []
    for line_no, obj in read_jsonl(path):
        merged = _existing(obj, path, line_no)
        for annotator, ranking in by_item.get(obj["id"], {}).items():
            if annotator in merged and merged[annotator] != ranking:
                raise DatasetError(
                    path, line_no, f"{annotator}'s ranking in the file differs from the database"
                )
            merged[annotator] = ranking
        if merged:
            names = sorted(merged)
            obj = {**obj, "annotations": [merged[n] for n in names], "annotators": names}
        rows.append(obj)
    clips = [obj for _, obj in read_jsonl(dataset_dir / "clips.jsonl")]
    out_dir.mkdir(parents=True, exist_ok=True)
    audio = [c["audio"] for c in clips if c.get("audio")]
    audio += [a for row in rows for a in row.get("context_audio") or []]
    for relative in dict.fromkeys(audio):
        try:
            source, target = contained(dataset_dir, relative), contained(out_dir, relative)
        except UnsafePath as exc:
            raise DatasetError(dataset_dir / "clips.jsonl", None, str(exc)) from None
        link_or_copy(source, target)
    write_jsonl(out_dir / "clips.jsonl", clips)
    write_jsonl(out_dir / "items.jsonl", rows)
    load_dataset(out_dir, check_audio=False)
    annotated = [r for r in rows if r.get("annotations")]
    return {
        "items": len(rows),
        "items_with_annotations": len(annotated),
        "rankings": sum(len(r["annotations"]) for r in annotated),
        "annotators": sorted({n for r in annotated for n in r["annotators"]}),
    }


def _existing(obj: dict[str, Any], path: Path, line_no: int) -> dict[str, list[str]]:
    annotations = obj.get("annotations") or []
    names = obj.get("annotators")
    if not annotations:
        return {}
    if not isinstance(names, list) or len(names) != len(annotations):
        raise DatasetError(
            path, line_no, "has annotations without matching 'annotators'; export into a copy"
        )
    return {str(n): list(r) for n, r in zip(names, annotations, strict=True)}
