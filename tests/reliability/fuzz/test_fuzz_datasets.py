"""Fuzz of a dataset folder's items.jsonl and clips.jsonl: any lines load as a dataset or
are one HarnessError line naming the file and line; no path it names leaves the folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from harness.core.dataset import load_dataset
from tests.reliability.fuzz._contract import SETTINGS, json_lines, within_contract

ITEM_KEYS = ["id", "dialogue", "query", "context_audio", "candidates", "human_ranking",
             "relevant", "relevance", "annotations", "group", "summary"]  # fmt: skip
CLIP_KEYS = ["id", "audio", "caption", "title", "aspects"]
PATHS = st.sampled_from(["a.wav", "../a.wav", "/etc/passwd", "x/../../y", "C:\\\\x", "", "\x00"])


def _clip() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {"id": st.sampled_from(["a", "b", "c"])},
        optional={"audio": PATHS, "caption": st.text(max_size=5), "title": st.text(max_size=5)},
    )


def _item() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {"id": st.sampled_from(["d0", "d1"]), "candidates": st.lists(st.sampled_from("abc"))},
        optional={
            "query": st.text(max_size=5),
            "context_audio": st.lists(PATHS, max_size=2),
            "relevant": st.lists(st.sampled_from("abcz"), max_size=3),
            "human_ranking": st.lists(st.sampled_from("abc"), max_size=4),
        },
    )


def test_any_dataset_loads_or_is_one_line(tmp_path: Path) -> None:
    root = tmp_path / "data"
    root.mkdir()

    @SETTINGS
    @given(items=json_lines(ITEM_KEYS, _item), clips=json_lines(CLIP_KEYS, _clip))
    def check(items: list[str], clips: list[str]) -> None:
        (root / "items.jsonl").write_bytes("\n".join(items).encode("utf-8", "surrogatepass"))
        (root / "clips.jsonl").write_bytes("\n".join(clips).encode("utf-8", "surrogatepass"))
        got = within_contract(lambda: load_dataset(root, check_audio=False))
        if isinstance(got, Exception):
            assert "jsonl" in str(got) or str(root) in str(got)
            return
        for clip in got.clips.values():
            if clip.audio is not None:
                assert clip.path.is_relative_to(root) and ".." not in clip.path.parts
        for item in got.items:
            assert all(".." not in Path(a).parts for a in item.context_audio or ())

    check()


def test_a_valid_dataset_still_loads(tmp_path: Path) -> None:
    root = tmp_path / "data"
    root.mkdir()
    (root / "clips.jsonl").write_text(
        "".join(json.dumps({"id": c, "title": c}) + "\n" for c in "ab")
    )
    (root / "items.jsonl").write_text(
        json.dumps({"id": "d0", "query": "q", "candidates": ["a", "b"], "relevant": ["a"]}) + "\n"
    )
    assert len(load_dataset(root).items) == 1
