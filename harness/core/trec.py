"""TREC run and qrels files, the form trec_eval, pytrec_eval, ranx and ir-measures read.

A run line is `QID Q0 DOCNO RANK SCORE TAG`; a qrels line is `QID 0 DOCNO GAIN`. Every tool
breaks equal scores its own way, so the harness writes scores that are never equal: the
candidates in `ranked` order get SCORE = N - RANK + 1. A run with ties gives the tools one of
its tie-breaks, while the harness's metrics are tie-aware (which figures agree: the export's
README, `CAVEAT` in harness.interop.trec_export). Qrels carry every candidate of an item with its gain (0 too), so an item without
relevant candidates is a query that scores 0, not one the tools leave out.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.core.errors import DatasetError, HarnessError
from harness.core.files import lines, text_lines
from harness.core.items import Item

Scores = Mapping[str, float | None]
MAX_FIRST_LINE = 1 << 16  # a run line is a few dozen bytes; a predictions line may be long
TrecScores = dict[int, dict[str, dict[str, float | None]]]  # as predictions.Predictions


def run_tag(path: Path) -> str | None:
    """The run tag (sixth field) of the first non-blank line of a TREC run file; None where
    `path` is not one."""
    try:
        for _, raw in lines(path, limit=MAX_FIRST_LINE):
            fields = raw.decode("utf-8", errors="replace").split()
            if fields:
                return fields[5] if len(fields) == 6 and fields[0][0] != "{" else None
    except DatasetError:  # not a file, or a first line too long for a run line
        return None
    return None


def is_trec_run(path: Path) -> bool:
    """Whether the first non-blank line of `path` has the six fields of a run line."""
    return run_tag(path) is not None


def ranked(item: Item, scores: Scores) -> list[str]:
    """The item's candidates in the documented order: score descending, equal scores in
    candidate order, unscored candidates last (in candidate order)."""
    order = {cid: i for i, cid in enumerate(item.candidates)}

    def key(cid: str) -> tuple[bool, float, int]:
        score = scores.get(cid)
        return (score is None, -(score or 0.0), order[cid])

    return sorted(item.candidates, key=key)


def check_ids(items: Sequence[Item]) -> None:
    """A TREC line is split at whitespace: an id holding some cannot be written as one."""
    for item in items:
        for name in (item.id, *item.candidates):
            if len(name.split()) != 1:
                raise HarnessError(
                    f"TREC files cannot hold the id {name!r} (item {item.id!r}): it has whitespace"
                )


def run_lines(items: Sequence[Item], scores: Mapping[str, Scores], tag: str) -> Iterator[str]:
    for item in items:
        if item.id not in scores:
            continue
        ordered = ranked(item, scores[item.id])
        n = len(ordered)
        for rank, cid in enumerate(ordered, start=1):
            yield f"{item.id} Q0 {cid} {rank} {n - rank + 1} {tag}\n"


def _gain(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def qrels_lines(items: Sequence[Item]) -> Iterator[str]:
    for item in items:
        if item.relevance_form is None:
            continue
        for cid in item.candidates:
            yield f"{item.id} 0 {cid} {_gain(item.relevance[cid])}\n"


def _fields(path: Path, n: tuple[int, ...], what: str) -> Iterator[tuple[int, list[str]]]:
    for line_no, line in text_lines(path, missing=f"{what} file not found"):
        fields = line.split()
        if len(fields) not in n:
            wanted = " or ".join(map(str, n))
            raise DatasetError(
                path, line_no, f"a {what} line has {wanted} fields, not {len(fields)}"
            )
        yield line_no, fields


def _number(path: Path, line_no: int, text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise DatasetError(path, line_no, f"{what} {text!r} is not a number") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise DatasetError(path, line_no, f"{what} {text!r} is not a finite number")
    return value


def read_run(path: Path, items: Sequence[Item]) -> TrecScores:
    """A TREC run file as predictions (repeat 0): each query's documents with their scores;
    a candidate the run leaves out has no score (the missing-score policy applies)."""
    candidates = {item.id: set(item.candidates) for item in items}
    scores: dict[str, dict[str, float | None]] = {}
    for line_no, (qid, _, docno, _, score, _) in _fields(path, (6,), "TREC run"):
        if qid not in candidates:
            raise DatasetError(path, line_no, f"unknown item id {qid!r}")
        if docno not in candidates[qid]:
            raise DatasetError(path, line_no, f"{docno!r} is not a candidate of {qid}")
        row = scores.setdefault(qid, {})
        if docno in row:
            raise DatasetError(path, line_no, f"{docno!r} listed twice for {qid}")
        row[docno] = _number(path, line_no, score, "score")
    return {0: scores}


def read_qrels(path: Path) -> dict[str, dict[str, float]]:
    """qid -> {docno: gain} from a qrels file (`QID ITER DOCNO GAIN`)."""
    qrels: dict[str, dict[str, float]] = {}
    for line_no, (qid, _, docno, gain) in _fields(path, (4,), "qrels"):
        value = _number(path, line_no, gain, "gain")
        if value < 0:  # trec_eval's -1 for "judged unjudgeable" counts as not relevant
            value = 0.0
        qrels.setdefault(qid, {})[docno] = value
    if not qrels:  # (every item would score 0)
        raise DatasetError(path, None, "no judgment in the qrels file")
    return qrels


def read_candidates(path: Path) -> dict[str, list[str]]:
    """qid -> candidate docnos, in file order, from `QID DOCNO` lines or a TREC run."""
    candidates: dict[str, dict[str, None]] = {}  # ordered sets: linear in the documents
    for _, fields in _fields(path, (2, 6), "candidates"):
        qid, docno = (fields[0], fields[1]) if len(fields) == 2 else (fields[0], fields[2])
        candidates.setdefault(qid, {})[docno] = None
    return {qid: list(docs) for qid, docs in candidates.items()}


def items_from_qrels(
    qrels: Mapping[str, Mapping[str, float]],
    candidates: Mapping[str, Sequence[str]],
    queries: Mapping[str, str] | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
    """Items (one per query with candidates), text-only clips (one per document, its docno as
    title) in the dataset folder format (`relevant` when every gain is 0 or 1, else graded),
    and how many judged relevant documents are left out (not among their query's candidates)."""
    items, docs, left_out = [], {}, 0
    for qid, listed in candidates.items():
        judged, pool = qrels.get(qid, {}), set(listed)
        gains = {d: g for d, g in judged.items() if g > 0 and d in pool}
        left_out += sum(1 for d, g in judged.items() if g > 0 and d not in pool)
        item: dict[str, Any] = {"id": qid, "query": (queries or {}).get(qid) or f"query {qid}"}
        item["candidates"] = list(listed)
        if all(g == 1 for g in gains.values()):
            item["relevant"] = list(gains)
        else:
            item["relevance"] = {d: float(g) for d, g in gains.items()}
        items.append(item)
        docs.update(dict.fromkeys(listed))
    clips = [{"id": docno, "title": docno} for docno in docs]
    return items, clips, left_out


def read_queries(path: Path) -> dict[str, str]:
    """qid -> text from a `QID<TAB>TEXT` file."""
    queries = {}
    for line_no, line in text_lines(path, missing="queries file not found"):
        qid, tab, text = line.rstrip("\n").partition("\t")
        if not tab or not text.strip():
            raise DatasetError(path, line_no, "a queries line is QID<TAB>TEXT")
        queries[qid.strip()] = text.strip()
    return queries
