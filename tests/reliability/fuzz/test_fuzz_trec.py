"""Fuzz of the TREC files the harness reads back (issue 48): a run, qrels, a candidate list and
query texts, of any tokens and bytes, read back as values or as one HarnessError line naming
the file; a run's items are those its qrels and documents make (`evaluate --qrels`)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from harness.core.errors import HarnessError
from harness.core.items import Item
from harness.core.trec import is_trec_run, read_candidates, read_qrels, read_queries, read_run
from harness.interop.inputs import qrels_items
from tests.reliability.fuzz._contract import SETTINGS, within_contract

WORDS = ["q1", "q2", "Q0", "0", "d1", "d2", "d3", "1", "2.5", "-1", "nan", "inf", "1e999", "tag",
         "{", "\t", "9" * 5000]  # fmt: skip
TOKENS = st.one_of(st.sampled_from(WORDS), st.text(max_size=6))
LINES = st.lists(st.lists(TOKENS, max_size=7).map(" ".join), min_size=1, max_size=8)
ITEMS = [
    Item.model_validate({"id": q, "query": "q", "candidates": ["d1", "d2", "d3"]})
    for q in ("q1", "q2")
]


def test_any_trec_file_reads_back_or_is_one_line(tmp_path: Path) -> None:
    path, qrels = tmp_path / "run.trec", tmp_path / "qrels.txt"
    readers = [
        lambda: read_run(path, ITEMS),
        lambda: read_qrels(path),
        lambda: read_candidates(path),
        lambda: read_queries(path),
        lambda: qrels_items(qrels, path),
    ]

    @SETTINGS
    @given(lines=LINES, judged=LINES, raw=st.binary(max_size=40))
    def check(lines: list[str], judged: list[str], raw: bytes) -> None:
        qrels.write_text("\n".join(judged) + "\n", encoding="utf-8", errors="surrogatepass")
        for data in ("\n".join(lines).encode("utf-8", "surrogatepass") + b"\n", raw):
            path.write_bytes(data)
            assert isinstance(is_trec_run(path), bool)
            for read in readers:
                got = within_contract(read)
                if isinstance(got, HarnessError):
                    assert str(path) in str(got) or str(qrels) in str(got), got

    check()
