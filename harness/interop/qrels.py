"""`harness import qrels`: a dataset folder from TREC qrels and a candidate list."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.core.dataset import load_dataset
from harness.core.errors import DatasetError, HarnessError
from harness.core.files import write_jsonl
from harness.core.trec import items_from_qrels, read_candidates, read_qrels, read_queries


@dataclass
class QrelsSummary:
    n_items: int
    n_clips: int
    n_relevant: int
    n_left_out: int  # judged relevant documents that are not among their query's candidates
    n_without_candidates: int  # judged queries the candidate list does not have


def import_qrels(
    qrels: Path, candidates: Path, out: Path, *, queries: Path | None = None
) -> QrelsSummary:
    """One item per query of the candidate list (its documents as text-only candidates,
    the docno as title), its relevance from the qrels; the query text from `queries`
    (`QID<TAB>TEXT`), else "query QID". The folder is loaded back to validate it; a dataset
    already in `out` is never replaced."""
    if any((out / name).exists() for name in ("items.jsonl", "clips.jsonl")):
        raise HarnessError(f"--out {out} holds a dataset: give a new folder")
    texts = read_queries(queries) if queries is not None else None
    return write_dataset(read_qrels(qrels), read_candidates(candidates), out, candidates, texts)


def write_dataset(
    judged: Mapping[str, Mapping[str, float]],
    listed: Mapping[str, Sequence[str]],
    out: Path,
    candidates: Path | str,
    texts: Mapping[str, str] | None = None,
) -> QrelsSummary:
    """The dataset folder of qrels `judged` and the candidates `listed` (read from
    `candidates`, which errors name)."""
    short = [qid for qid, docs in listed.items() if len(docs) < 2]
    if short:
        raise DatasetError(candidates, None, f"queries with fewer than 2 candidates: {short[:5]}")
    items, clips, left_out = items_from_qrels(judged, listed, texts)
    if not items:
        raise DatasetError(candidates, None, "no queries")
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl(out / "items.jsonl", items)
    write_jsonl(out / "clips.jsonl", clips)
    load_dataset(out, check_audio=False)
    return QrelsSummary(
        n_items=len(items),
        n_clips=len(clips),
        n_relevant=sum(
            len(i.get("relevant") or [g for g in (i.get("relevance") or {}).values() if g > 0])
            for i in items
        ),
        n_left_out=left_out,
        n_without_candidates=len(set(judged) - set(listed)),
    )
