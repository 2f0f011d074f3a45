"""harness.core.items: what a loaded item holds in memory, and the pydantic-like surface the rest
of the harness uses."""

from __future__ import annotations

import copy
import json
import pickle
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from harness.core.dataset import Item, Turn, load_dataset
from harness.core.items import Dialogue, Schema, from_schema

N_ITEMS = 2000
WORDS = ["rain", "window", "coffee", "late", "train", "morning", "guitar", "quiet", "city", "dance"]


def _dataset(root: Path, n_items: int) -> tuple[Path, int]:
    """A dataset shaped as the memory benchmark's (6 turns, a summary, 4 of 400 candidates,
    a human ranking); returns it and the number of characters of its text per item."""
    root.mkdir()
    clips = [{"id": f"c{k:05d}", "caption": f"tone {k}"} for k in range(400)]
    (root / "clips.jsonl").write_text("".join(json.dumps(c) + "\n" for c in clips))
    lines, text = [], 0
    for i in range(n_items):
        turns = [
            {"speaker": "AB"[t % 2], "text": " ".join(WORDS[(i + t + w) % 10] for w in range(9))}
            for t in range(6)
        ]
        candidates = [clips[(4 * i + j) % 400]["id"] for j in range(4)]
        summary = f"dialogue {i} about rain"
        text += sum(len(t["text"]) for t in turns) + len(summary)
        item = {
            "id": f"d{i:06d}",
            "dialogue": turns,
            "summary": summary,
            "candidates": candidates,
            "human_ranking": candidates[::-1],
        }
        lines.append(json.dumps(item) + "\n")
    (root / "items.jsonl").write_text("".join(lines))
    return root, text // n_items


def test_a_loaded_item_holds_little_beyond_its_text(tmp_path: Path) -> None:
    """The in-memory dataset is most of a scorer run's memory per call: an item of 6 turns
    and 4 candidates holds under 800 bytes beyond the characters of its text (a tuple of turn
    objects with a string each: ~1,230; pydantic models of the item and its turns: ~5,000)."""
    root, text_chars = _dataset(tmp_path / "d", N_ITEMS)
    load_dataset(root, check_audio=False)  # imports and caches out of the measurement
    tracemalloc.start()
    try:
        data = load_dataset(root, check_audio=False)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(data.items) == N_ITEMS
    beyond_text = held / N_ITEMS - text_chars
    assert beyond_text < 800, f"{held / N_ITEMS:.0f} B per item, {text_chars} of them text"


def test_candidate_ids_are_the_clips_own_strings(tmp_path: Path) -> None:
    root, _ = _dataset(tmp_path / "d", 3)
    data = load_dataset(root, check_audio=False)
    clip_ids = {cid: cid for cid in data.clips}
    for item in data.items:
        assert all(cid is clip_ids[cid] for cid in item.candidates)
        assert all(cid is clip_ids[cid] for cid in item.human_ranking or ())


def test_the_pydantic_like_surface() -> None:
    item = Item(
        id="d1",
        dialogue=(Turn(speaker="A", text="hi"),),
        candidates=("a", "b", "c"),
        relevant=("b",),
        split="test",
    )
    assert item == Item.model_validate(
        {
            "id": "d1",
            "dialogue": [{"speaker": "A", "text": "hi"}],
            "candidates": ["a", "b", "c"],
            "relevant": ["b"],
            "split": "test",
        }
    )
    assert item.model_extra == {"split": "test"} and item.split == "test"
    assert list(item.gains) == [0.0, 1.0, 0.0] and item.relevance == {"a": 0, "b": 1, "c": 0}
    narrowed = item.model_copy(update={"candidates": ("b", "c")})
    assert list(narrowed.gains) == [1.0, 0.0] and item.candidates == ("a", "b", "c")
    assert pickle.loads(pickle.dumps(item)) == item == copy.deepcopy(item)
    assert hash(item) == hash(copy.copy(item))
    with pytest.raises(TypeError, match="immutable"):
        item.id = "d2"
    with pytest.raises(ValidationError, match=r"dialogue\.0\.text"):
        Item(id="d1", dialogue=({"speaker": "A", "text": ""},), candidates=("a", "b"))
    with pytest.raises(AttributeError):
        _ = item.nope
    assert "id='d1'" in repr(item) and "split='test'" in repr(item)


@settings(max_examples=200)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["A", "B", "Dr. Chen"]), st.text(alphabet="ab\x00\n ", max_size=6)
        ),
        max_size=5,
    )
)
def test_a_dialogue_reads_back_as_the_turns_it_was_given(pairs: list[tuple[str, str]]) -> None:
    turns = tuple(Turn(speaker, text) for speaker, text in pairs)
    dialogue = Dialogue(turns)
    assert tuple(dialogue) == turns and len(dialogue) == len(turns)
    assert dialogue == turns and dialogue == list(turns) and turns == dialogue
    assert [dialogue[i] for i in range(len(turns))] == list(turns)
    assert dialogue[1:] == turns[1:] and repr(dialogue) == repr(turns)
    assert pickle.loads(pickle.dumps(dialogue)) == dialogue
    assert hash(dialogue) == hash(Dialogue(list(turns)))


def test_dialogues_with_the_same_speakers_share_them() -> None:
    first = Dialogue([Turn("A", "hi"), Turn("B", "hello")])
    second = Dialogue([Turn("A", "rain"), Turn("B", "again")])
    assert first._speakers is second._speakers


@pytest.mark.parametrize("relevant", [(), ("b",), ("a", "c")])
def test_ids_are_looked_up_whatever_their_number(relevant: tuple[str, ...]) -> None:
    """Candidates, rankings and gold (none, one or several) become the strings of `ids`;
    a name missing from `ids` is a KeyError (load_items names the unknown candidates)."""
    ids = {c: (c + ".")[:-1] for c in "abc"}
    checked = Schema.Item.model_validate(
        {"id": "d1", "query": "q", "candidates": ["a", "b", "c"], "relevant": list(relevant)}
    )
    item = from_schema(checked, ids)
    assert item.candidates == ("a", "b", "c") and item.relevant == relevant
    assert all(c is ids[c] for c in (*item.candidates, *(item.relevant or ())))
    with pytest.raises(KeyError):
        from_schema(checked, {"a": "a", "b": "b"})
