"""Dataset folder format (docs/formats.md): `items.jsonl` + `clips.jsonl` + audio files.

An item (one line of `items.jsonl`) has an `id`, its `candidates` (clip ids, at least two) and
what the candidates are chosen for: a `dialogue` (turns), a text `query`, `context_audio`
(audio files relative to the dataset folder, e.g. songs the user played), or several of these;
at least one must be given (a MusiCRS-style item may have a query and no turns). Optional:
`summary`, `group` (a label for per-group breakdowns) and `annotations` (per-annotator
rankings, each a permutation of the candidates).

Relevance comes in exactly one of three forms:
- `human_ranking`: a permutation of the candidates, best first; graded gain N-1-position.
- `relevant`: candidate ids that are all equally relevant (gain 1; the others 0). May be empty:
  the item then scores 0 on every metric.
- `relevance`: {candidate id: gain}, gains finite and >= 0; candidates not listed have gain 0.
An item with none of them loads (datasets are built before they are annotated: stage 3,
`harness annotate`) but cannot be evaluated (`harness.scoring.metrics.build_matrix` refuses it).

A clip (one line of `clips.jsonl`) has an `id` and at least one of `audio` (a file relative to
the dataset folder), `caption` and `title`: a text-only candidate (a song title) has no audio.

Every validation failure raises `DatasetError` naming the file, the line and the reason.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal, Self

import numpy as np
import soundfile
from numpy.typing import NDArray
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    ValidationError,
    model_validator,
)

from harness.errors import DatasetError, HarnessError
from harness.paths import contained, inside

RelevanceForm = Literal["human_ranking", "relevant", "relevance"]
NonEmpty = Annotated[str, Field(min_length=1)]


def _inside_folder(relative: str) -> str:
    inside(relative, "the audio path")
    return relative


# A file named relative to the dataset folder, that stays inside it (`harness.paths`).
InFolder = Annotated[str, Field(min_length=1), AfterValidator(_inside_folder)]


class Turn(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    speaker: str = Field(min_length=1)
    text: str = Field(min_length=1)


class Item(BaseModel):
    """One dialogue (or query) with its candidate clips and their relevance."""

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)
    id: str = Field(min_length=1)
    dialogue: tuple[Turn, ...] = ()
    query: str | None = Field(default=None, min_length=1)
    context_audio: tuple[InFolder, ...] | None = None
    summary: str | None = None
    group: str | None = Field(default=None, min_length=1)
    candidates: tuple[str, ...] = Field(min_length=2)
    human_ranking: tuple[str, ...] | None = None
    annotations: tuple[tuple[str, ...], ...] | None = None
    relevant: tuple[str, ...] | None = None
    # `relevance` in the file; the attribute name is taken by the gain map of any form.
    graded: dict[str, Annotated[float, Strict()]] | None = Field(default=None, alias="relevance")

    @model_validator(mode="after")
    def _check(self) -> Self:
        if not (self.dialogue or self.query or self.context_audio):
            raise ValueError("an item needs a dialogue, a query or context_audio")
        if len(set(self.candidates)) != len(self.candidates):
            raise ValueError(f"candidates contain duplicates: {list(self.candidates)}")
        forms = [
            name
            for name, value in (
                ("human_ranking", self.human_ranking),
                ("relevant", self.relevant),
                ("relevance", self.graded),
            )
            if value is not None
        ]
        if len(forms) > 1:
            raise ValueError(f"an item carries one relevance form, not {' and '.join(forms)}")
        rankings = [] if self.human_ranking is None else [("human_ranking", self.human_ranking)]
        rankings += [(f"annotations[{i}]", r) for i, r in enumerate(self.annotations or ())]
        for field, ranking in rankings:
            if sorted(ranking) != sorted(self.candidates):
                raise ValueError(
                    f"{field} {list(ranking)} is not a permutation of candidates "
                    f"{list(self.candidates)}"
                )
        named = list(self.relevant or ()) + list(self.graded or {})
        unknown = [cid for cid in named if cid not in self.candidates]
        if unknown:
            raise ValueError(f"{forms[0]} names id(s) not among the candidates: {unknown}")
        if self.relevant is not None and len(set(self.relevant)) != len(self.relevant):
            raise ValueError(f"relevant contains duplicates: {list(self.relevant)}")
        for cid, gain in (self.graded or {}).items():
            if not (math.isfinite(gain) and gain >= 0):
                raise ValueError(f"relevance of {cid!r} must be a finite number >= 0, not {gain}")
        return self

    @property
    def relevance_form(self) -> RelevanceForm | None:
        if self.human_ranking is not None:
            return "human_ranking"
        if self.relevant is not None:
            return "relevant"
        return "relevance" if self.graded is not None else None

    @cached_property
    def relevance(self) -> dict[str, float]:
        """The gain of every candidate, whatever the form: N - 1 - position in the human
        ranking (with N=4 the ranks 1..4 map to 3, 2, 1, 0), 1 or 0 for `relevant`, the
        given gains (0 where not listed) for `relevance`."""
        if self.human_ranking is not None:
            n = len(self.human_ranking)
            return {cid: n - 1 - pos for pos, cid in enumerate(self.human_ranking)}
        if self.relevant is not None:
            chosen = set(self.relevant)
            return {cid: int(cid in chosen) for cid in self.candidates}
        if self.graded is not None:
            return {cid: self.graded.get(cid, 0.0) for cid in self.candidates}
        raise ValueError(f"item {self.id} has no relevance judgement")

    @cached_property
    def gains(self) -> NDArray[np.float64]:
        """`relevance` in candidate order (read-only)."""
        n = len(self.candidates)
        given: dict[str, float]
        if self.human_ranking is not None:
            given = dict(zip(self.human_ranking, range(n - 1, -1, -1), strict=True))
        elif self.relevant is not None or self.graded is not None:
            given = dict.fromkeys(self.relevant or (), 1.0) | (self.graded or {})
        else:
            raise ValueError(f"item {self.id} has no relevance judgement")
        if len(given) > 8:  # a lookup table beats tuple.index
            position = {cid: i for i, cid in enumerate(self.candidates)}
            where = [position[cid] for cid in given]
        else:
            where = [self.candidates.index(cid) for cid in given]
        gains = np.zeros(n)
        gains[where] = list(given.values())
        gains.flags.writeable = False
        return gains

    def dialogue_text(self) -> str:
        return "\n".join(f"{turn.speaker}: {turn.text}" for turn in self.dialogue)


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

    @property
    def path(self) -> Path:
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
    # The items a scorer fits on (`Scorer.fit`) when they are not `items`: a shard's dataset
    # (`harness.sharding`) keeps the whole dataset's, so its scores are the unsharded run's.
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


def jsonl_lines(path: Path, missing: str = "file not found") -> Iterator[tuple[int, str]]:
    """(line number, text) for each non-blank line, decoded as UTF-8; DatasetError names a
    line that is not UTF-8, or says `missing` when the file is not there."""
    if not path.is_file():
        raise DatasetError(path, None, missing)
    with path.open("rb") as handle:
        for line_no, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DatasetError(path, line_no, f"not valid UTF-8 ({exc.reason})") from None
            if line.strip():
                yield line_no, line


def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line; DatasetError names a bad line."""
    for line_no, line in jsonl_lines(path):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(path, line_no, f"not valid JSON ({exc.msg})") from None
        except RecursionError:
            raise DatasetError(path, line_no, "not valid JSON (nested too deep)") from None
        except ValueError:  # Python refuses integers of more than 4,300 digits
            reason = "not valid JSON (a number of more than 4,300 digits)"
            raise DatasetError(path, line_no, reason) from None
        if not isinstance(obj, dict):
            raise DatasetError(path, line_no, "expected a JSON object")
        yield line_no, obj


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
            _check_audio(root, clip.audio, path, line_no)
        clips[clip.id] = clip
    return clips


def _check_audio(root: Path, audio: str, path: Path, line_no: int, what: str = "audio") -> None:
    """`audio` (relative to `root`) exists, decodes and has samples."""
    file = contained(root, audio)
    if not file.is_file():
        raise DatasetError(path, line_no, f"{what} file not found: {audio}")
    try:
        info = soundfile.info(str(file))
    except (RuntimeError, soundfile.LibsndfileError) as exc:
        raise DatasetError(path, line_no, f"unreadable {what} {audio}: {exc}") from None
    if info.frames == 0:
        raise DatasetError(path, line_no, f"{what} file has no samples: {audio}")


def load_items(root: Path, clips: dict[str, Clip], *, check_audio: bool = True) -> tuple[Item, ...]:
    path = root / "items.jsonl"
    items: list[Item] = []
    seen: set[str] = set()
    for line_no, obj in read_jsonl(path):
        try:
            item = Item.model_validate(obj)
        except ValidationError as exc:
            raise DatasetError(path, line_no, pydantic_reason(exc)) from None
        if item.id in seen:
            raise DatasetError(path, line_no, f"duplicate item id {item.id!r}")
        unknown = [cid for cid in item.candidates if cid not in clips]
        if unknown:
            raise DatasetError(path, line_no, f"unknown candidate id(s) {unknown}")
        if check_audio:
            for audio in item.context_audio or ():
                _check_audio(root, audio, path, line_no, "context audio")
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
    items = load_items(root, clips, check_audio=check_audio)
    return Dataset(root=root, items=items, clips=clips)
