"""Dataset folder format (docs/formats.md): `items.jsonl` + `clips.jsonl` + audio files.

An item has an `id`, its `candidates` (at least two) and at least one of a `dialogue`, a text
`query` and `context_audio`; relevance comes in exactly one of three forms (`human_ranking`,
`relevant`, `relevance`), or none until it is annotated (then it loads but cannot be
evaluated). A clip has an `id` and at least one of `audio`, `caption` and `title`. Every
validation failure raises `DatasetError` naming the file, the line and the reason.
"""

from __future__ import annotations

import gc
import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import Self

import soundfile
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from harness.core.errors import DatasetError, HarnessError
from harness.core.files import MAX_POOL_VALUES, read_jsonl
from harness.core.items import FIELDS, InFolder, Item, RelevanceForm, Schema, Turn, from_schema
from harness.core.paths import contained

RELEVANCE_FORMS = "human_ranking, relevant or relevance"
__all__ = ["Clip", "Dataset", "InFolder", "Item", "RelevanceForm", "Turn", "load_dataset"]


class Clip(BaseModel):
    """A candidate: audio, or text only (a caption or a title)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    id: str = Field(min_length=1)
    audio: InFolder | None = None
    title: str | None = Field(default=None, min_length=1)
    caption: str = ""
    aspects: tuple[str, ...] = ()
    root: Path = Field(default=Path("."), exclude=True)

    @model_validator(mode="after")
    def _has_content(self) -> Self:
        if self.audio is None and not self.caption and self.title is None:
            raise ValueError("a clip needs audio, a caption or a title")
        return self

    @property
    def has_audio(self) -> bool:
        return self.audio is not None

    @property
    def text(self) -> str:
        """The words that stand for the clip: its caption, else its title."""
        return self.caption or self.title or ""

    @cached_property
    def path(self) -> Path:
        """The audio file, checked (once per clip) to lie inside the dataset folder."""
        if self.audio is None:
            raise HarnessError(
                f"clip {self.id} has no audio (a text-only candidate): use inputs music: caption"
            )
        return contained(self.root, self.audio)


class Dataset(BaseModel):
    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    root: Path
    items: tuple[Item, ...]
    clips: dict[str, Clip]
    # The items a scorer fits on (`Scorer.fit`) when not `items`: a shard keeps the whole's.
    population: tuple[Item, ...] | None = None

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

    def check_judged(self) -> None:
        """DatasetError naming items.jsonl and its line where an item has no relevance
        judgement: it loads (to be annotated) but cannot be evaluated."""
        item = next((item for item in self.items if item.relevance_form is None), None)
        if item is not None:
            path = self.root / "items.jsonl"
            lines = read_jsonl(path, max_values=MAX_POOL_VALUES) if path.is_file() else iter(())
            line = next((n for n, obj in lines if obj.get("id") == item.id), None)
            reason = f"item {item.id} has no relevance judgement ({RELEVANCE_FORMS})"
            raise DatasetError(path, line, reason + ": annotate the dataset before evaluating")

    def content_sha256(self, *, audio: bool) -> str:
        """A digest of what a judge is shown of these items: every field of each item in
        order, then each of their candidates' clips once, with the SHA-256 of every audio
        file they name when `audio` (the run sends audio). Equal digests, equal answers."""
        from harness.core.audio import file_sha256

        digest = hashlib.sha256()
        clips: dict[str, None] = {}
        for item in self.items:
            fields = {name: getattr(item, name) for name in FIELDS} | item.model_extra
            fields["dialogue"] = [[turn.speaker, turn.text] for turn in item.dialogue]
            if audio:
                named = item.context_audio or ()
                fields["audio"] = [file_sha256(contained(self.root, a)) for a in named]
            digest.update(json.dumps(fields, sort_keys=True, default=repr).encode() + b"\n")
            clips.update(dict.fromkeys(item.candidates))
        for cid in clips:
            clip = self.clips[cid]
            shown = clip.model_dump(mode="json")
            if audio and clip.audio is not None:
                shown["sha256"] = file_sha256(clip.path)
            digest.update(json.dumps(shown, sort_keys=True, default=repr).encode() + b"\n")
        return digest.hexdigest()


@contextmanager
def gc_paused() -> Iterator[None]:
    """Cyclic garbage collection paused while a file's lines become objects (they make no
    cycles, and each collection would walk every object alive)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def pydantic_reason(exc: ValidationError) -> str:
    """The first error of a pydantic validation as `field: message`."""
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
            raise DatasetError(path, line_no, pydantic_reason(exc)) from None
        if clip.id in clips:
            raise DatasetError(path, line_no, f"duplicate clip id {clip.id!r}")
        if check_audio and clip.audio is not None:
            _check_audio(clip.path, clip.audio, path, line_no)
        clips[clip.id] = clip
    return clips


def _check_audio(file: Path, audio: str, path: Path, line_no: int, what: str = "audio") -> None:
    """`file` (`audio` as the dataset names it) exists, decodes and has samples."""
    if not file.is_file():
        raise DatasetError(path, line_no, f"{what} file not found: {audio}")
    try:
        frames = soundfile.info(str(file)).frames
    except (RuntimeError, soundfile.LibsndfileError) as exc:
        raise DatasetError(path, line_no, f"unreadable {what} {audio}: {exc}") from None
    if frames == 0:
        raise DatasetError(path, line_no, f"{what} file has no samples: {audio}")


def load_items(root: Path, clips: dict[str, Clip], *, check_audio: bool = True) -> tuple[Item, ...]:
    """The items of `root`/items.jsonl, each checked by the schema and kept compact, its
    candidate ids the clips' own strings (one copy of each id however many items name it)."""
    path = root / "items.jsonl"
    items: list[Item] = []
    seen: set[str] = set()
    ids = {cid: cid for cid in clips}
    for line_no, obj in read_jsonl(path, max_values=MAX_POOL_VALUES):
        try:
            checked = Schema.Item.model_validate(obj)
        except ValidationError as exc:
            raise DatasetError(path, line_no, pydantic_reason(exc)) from None
        if checked.id in seen:
            raise DatasetError(path, line_no, f"duplicate item id {checked.id!r}")
        try:
            item = from_schema(checked, ids)
        except KeyError:
            unknown = [cid for cid in checked.candidates if cid not in ids]
            raise DatasetError(path, line_no, f"unknown candidate id(s) {unknown}") from None
        if check_audio:
            for audio in item.context_audio or ():
                _check_audio(contained(root, audio), audio, path, line_no, "context audio")
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
    with gc_paused():
        clips = load_clips(root, check_audio=check_audio)
        items = load_items(root, clips, check_audio=check_audio)
    return Dataset(root=root, items=items, clips=clips)
