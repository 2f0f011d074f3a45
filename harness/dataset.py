"""Dataset folder format of DESIGN.md: `items.jsonl` + `clips.jsonl` + audio files.

Every validation failure raises `DatasetError` naming the file, the line and the reason.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from typing import Any, Self

import soundfile
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from harness.errors import DatasetError


class Turn(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    speaker: str = Field(min_length=1)
    text: str = Field(min_length=1)


class Item(BaseModel):
    """One dialogue with its candidate clips and the human ranking (best first)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    id: str = Field(min_length=1)
    dialogue: tuple[Turn, ...] = Field(min_length=1)
    summary: str | None = None
    candidates: tuple[str, ...] = Field(min_length=2)
    human_ranking: tuple[str, ...] | None = None
    annotations: tuple[tuple[str, ...], ...] | None = None

    @model_validator(mode="after")
    def _rankings_are_permutations(self) -> Self:
        if len(set(self.candidates)) != len(self.candidates):
            raise ValueError(f"candidates contain duplicates: {list(self.candidates)}")
        rankings = [("human_ranking", self.human_ranking)] if self.human_ranking else []
        rankings += [(f"annotations[{i}]", r) for i, r in enumerate(self.annotations or ())]
        for field, ranking in rankings:
            if sorted(ranking) != sorted(self.candidates):
                raise ValueError(
                    f"{field} {list(ranking)} is not a permutation of candidates "
                    f"{list(self.candidates)}"
                )
        return self

    @property
    def relevance(self) -> dict[str, int]:
        """N - position in the human ranking: with N=4 the ranks 1..4 map to 3, 2, 1, 0."""
        if self.human_ranking is None:
            raise ValueError(f"item {self.id} has no human_ranking")
        n = len(self.human_ranking)
        return {cid: n - 1 - pos for pos, cid in enumerate(self.human_ranking)}

    def dialogue_text(self) -> str:
        return "\n".join(f"{turn.speaker}: {turn.text}" for turn in self.dialogue)


class Clip(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)
    id: str = Field(min_length=1)
    audio: str = Field(min_length=1)
    caption: str = ""
    aspects: tuple[str, ...] = ()
    root: Path = Field(default=Path("."), exclude=True)

    @property
    def path(self) -> Path:
        return self.root / self.audio


class Dataset(BaseModel):
    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    root: Path
    items: tuple[Item, ...]
    clips: dict[str, Clip]

    @cached_property
    def n_candidates(self) -> int:
        return max(len(item.candidates) for item in self.items)

    def item(self, item_id: str) -> Item:
        return self._items_by_id[item_id]

    @cached_property
    def _items_by_id(self) -> dict[str, Item]:
        return {item.id: item for item in self.items}

    def subset(self, item_ids: list[str]) -> Dataset:
        return Dataset(
            root=self.root, items=tuple(self.item(i) for i in item_ids), clips=self.clips
        )


def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line; DatasetError names a bad line."""
    if not path.is_file():
        raise DatasetError(path, None, "file not found")
    with path.open("rb") as handle:
        for line_no, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DatasetError(path, line_no, f"not valid UTF-8 ({exc.reason})") from None
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetError(path, line_no, f"not valid JSON ({exc.msg})") from None
            if not isinstance(obj, dict):
                raise DatasetError(path, line_no, "expected a JSON object")
            yield line_no, obj


def _pydantic_reason(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    message = first["msg"].removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


def load_clips(root: Path, *, check_audio: bool = True) -> dict[str, Clip]:
    path = root / "clips.jsonl"
    clips: dict[str, Clip] = {}
    for line_no, obj in read_jsonl(path):
        try:
            clip = Clip.model_validate({**obj, "root": root})
        except ValidationError as exc:
            raise DatasetError(path, line_no, _pydantic_reason(exc)) from None
        if clip.id in clips:
            raise DatasetError(path, line_no, f"duplicate clip id {clip.id!r}")
        if check_audio:
            _check_audio(clip, path, line_no)
        clips[clip.id] = clip
    return clips


def _check_audio(clip: Clip, path: Path, line_no: int) -> None:
    if not clip.path.is_file():
        raise DatasetError(path, line_no, f"audio file not found: {clip.audio}")
    try:
        info = soundfile.info(str(clip.path))
    except (RuntimeError, soundfile.LibsndfileError) as exc:
        raise DatasetError(path, line_no, f"unreadable audio {clip.audio}: {exc}") from None
    if info.frames == 0:
        raise DatasetError(path, line_no, f"audio file has no samples: {clip.audio}")


def load_items(root: Path, clips: dict[str, Clip]) -> tuple[Item, ...]:
    path = root / "items.jsonl"
    items: list[Item] = []
    seen: set[str] = set()
    for line_no, obj in read_jsonl(path):
        try:
            item = Item.model_validate(obj)
        except ValidationError as exc:
            raise DatasetError(path, line_no, _pydantic_reason(exc)) from None
        if item.id in seen:
            raise DatasetError(path, line_no, f"duplicate item id {item.id!r}")
        unknown = [cid for cid in item.candidates if cid not in clips]
        if unknown:
            raise DatasetError(path, line_no, f"unknown candidate id(s) {unknown}")
        seen.add(item.id)
        items.append(item)
    if not items:
        raise DatasetError(path, None, "no items")
    return tuple(items)


def load_dataset(root: str | Path, *, check_audio: bool = True) -> Dataset:
    """Load and validate a dataset folder; raises DatasetError on the first problem."""
    root = Path(root)
    if not root.is_dir():
        raise DatasetError(root, None, "dataset folder not found")
    clips = load_clips(root, check_audio=check_audio)
    return Dataset(root=root, items=load_items(root, clips), clips=clips)
