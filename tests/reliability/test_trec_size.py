"""TREC files are read in time linear in the documents of a query (issue 48): `import qrels`
of 20k/40k/80k documents took 6.8/24.7/124 s and `evaluate --qrels` of one query of 100k
documents 160 s (list membership per document); the bound here is generous for a loaded
machine."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from harness.interop.inputs import qrels_items
from harness.interop.qrels import import_qrels

N = 100_000


@pytest.fixture
def big(tmp_path: Path) -> tuple[Path, Path]:
    run = tmp_path / "run.trec"
    run.write_text("".join(f"q1 Q0 doc{i} {i + 1} {N - i} tag\n" for i in range(N)))
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("".join(f"q1 0 doc{i} 1\n" for i in range(0, N, 100)))
    return run, qrels


@pytest.mark.slow
def test_import_qrels_of_one_query_of_100k_documents_is_linear(
    tmp_path: Path, big: tuple[Path, Path]
) -> None:
    run, qrels = big
    started = time.perf_counter()
    summary = import_qrels(qrels, run, tmp_path / "out")
    assert summary.n_clips == N and summary.n_relevant == N // 100
    assert time.perf_counter() - started < 30.0


@pytest.mark.slow
def test_evaluate_qrels_of_one_query_of_100k_documents_is_linear(big: tuple[Path, Path]) -> None:
    run, qrels = big
    started = time.perf_counter()
    (item,) = qrels_items(qrels, run)
    assert len(item.candidates) == N and len(item.relevant or ()) == N // 100
    assert time.perf_counter() - started < 30.0
