"""Rankings from the annotation database into the dataset's `items.jsonl`.

Each item gets `annotations` (rankings, best first) and `annotators` (whose ranking each
one is), ordered by annotator name. Annotations already in the file are kept and merged by
annotator; a ranking for the same annotator must agree with the database.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.annotate.store import RankingStore
from harness.construct.files import write_jsonl
from harness.dataset import load_dataset, read_jsonl
from harness.errors import DatasetError


def export_annotations(dataset_dir: Path, store: RankingStore) -> dict[str, Any]:
    """Rewrite `dataset_dir/items.jsonl` with the stored rankings; returns counts."""
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
    write_jsonl(path, rows)
    load_dataset(dataset_dir, check_audio=False)
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
