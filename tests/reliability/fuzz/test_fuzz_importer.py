"""Fuzz of the MusiCRS importer's input (`harness import musicrs`): any lines import as a
dataset or are one HarnessError line naming the file and line; nothing is read outside
--audio."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from harness.interop.musicrs import import_musicrs
from tests.reliability.fuzz._contract import SETTINGS, json_lines, within_contract

KEYS = ["name", "query", "combined_text", "source_subreddit", "final_candidates",
        "limited_gt", "url"]  # fmt: skip


def _thread() -> st.SearchStrategy[dict[str, Any]]:
    titles = st.lists(st.sampled_from(["A", "B", "a ", "“A”"]), max_size=4)
    return st.fixed_dictionaries(
        {
            "name": st.sampled_from(["t1", "t2", "../x", "/etc", "a/b", ".."]),
            "query": st.text(max_size=5),
            "combined_text": st.text(max_size=5),
            "source_subreddit": st.text(max_size=5),
            "final_candidates": titles,
            "limited_gt": titles,
        }
    )


def test_any_musicrs_input_imports_or_is_one_line(tmp_path: Path) -> None:
    source = tmp_path / "src.jsonl"
    (tmp_path / "audio").mkdir()
    runs = iter(range(10**6))

    @SETTINGS
    @given(lines=json_lines(KEYS, _thread))
    def check(lines: list[str]) -> None:
        source.write_bytes("\n".join(lines).encode("utf-8", "surrogatepass"))
        out = tmp_path / f"out{next(runs)}"
        got = within_contract(lambda: import_musicrs(source, out, audio=tmp_path / "audio"))
        if isinstance(got, Exception):
            assert "src.jsonl" in str(got) or "--" in str(got) or str(out) in str(got)

    check()
