"""An item of a dataset (one line of `items.jsonl`) and its dialogue turns, as compact objects
(a 100,000-item dataset in a few hundred bytes per item beyond its text): slots, candidate ids
shared with the clips', speaker names interned. Validation is pydantic's (`Schema.Item`, whose
messages name the field); the compact object is kept (`from_schema`), the model dropped."""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Self, overload

import numpy as np
from numpy.typing import NDArray
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, Strict, model_validator

from harness.core.paths import inside

RelevanceForm = Literal["human_ranking", "relevant", "relevance"]


def _inside_folder(relative: str) -> str:
    inside(relative, "the audio path")
    return relative


# A file named relative to the dataset folder, that stays inside it (`harness.core.paths`).
InFolder = Annotated[str, Field(min_length=1), AfterValidator(_inside_folder)]


class Schema:
    """The pydantic models an item is validated with (named as the objects they check)."""

    class Turn(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        speaker: str = Field(min_length=1)
        text: str = Field(min_length=1)

    class Item(BaseModel):
        model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)
        id: str = Field(min_length=1)
        dialogue: tuple[Schema.Turn, ...] = ()
        query: str | None = Field(default=None, min_length=1)
        context_audio: tuple[InFolder, ...] | None = None
        summary: str | None = None
        group: str | None = Field(default=None, min_length=1)
        candidates: tuple[str, ...] = Field(min_length=2)
        human_ranking: tuple[str, ...] | None = None
        annotations: tuple[tuple[str, ...], ...] | None = None
        relevant: tuple[str, ...] | None = None
        # `relevance` in the file; the attribute name is taken by the gain map of any form.
        graded: dict[str, Annotated[float, Strict()]] | None = Field(
            default=None, alias="relevance"
        )

        @model_validator(mode="after")
        def _check(self) -> Self:
            _check_item(self)
            return self


Schema.Item.model_rebuild()


def _check_item(item: Schema.Item) -> None:
    if not (item.dialogue or item.query or item.context_audio):
        raise ValueError("an item needs a dialogue, a query or context_audio")
    candidates = set(item.candidates)
    if len(candidates) != len(item.candidates):
        raise ValueError(f"candidates contain duplicates: {list(item.candidates)}")
    given = (
        ("human_ranking", item.human_ranking),
        ("relevant", item.relevant),
        ("relevance", item.graded),
    )
    forms = [name for name, value in given if value is not None]
    if len(forms) > 1:
        raise ValueError(f"an item carries one relevance form, not {' and '.join(forms)}")
    rankings = [] if item.human_ranking is None else [("human_ranking", item.human_ranking)]
    rankings += [(f"annotations[{i}]", r) for i, r in enumerate(item.annotations or ())]
    for field, ranking in rankings:
        # (the candidates are distinct: a permutation has their length and their set)
        if len(ranking) != len(item.candidates) or set(ranking) != candidates:
            raise ValueError(
                f"{field} {list(ranking)} is not a permutation of candidates "
                f"{list(item.candidates)}"
            )
    named = list(item.relevant or ()) + list(item.graded or {})
    unknown = [cid for cid in named if cid not in candidates]
    if unknown:
        raise ValueError(f"{forms[0]} names id(s) not among the candidates: {unknown}")
    if item.relevant is not None and len(set(item.relevant)) != len(item.relevant):
        raise ValueError(f"relevant contains duplicates: {list(item.relevant)}")
    for cid, gain in (item.graded or {}).items():
        if not (math.isfinite(gain) and gain >= 0):
            raise ValueError(f"relevance of {cid!r} must be a finite number >= 0, not {gain}")


@dataclass(frozen=True, slots=True)
class Turn:
    speaker: str
    text: str


_SEPARATOR = "\x00"  # between a dialogue's texts, unless one of them holds it
_SPEAKER_ORDERS: dict[tuple[str, ...], tuple[str, ...]] = {}  # shared between dialogues
_MAX_SPEAKER_ORDERS = 10_000


class Dialogue(Sequence[Turn]):
    """An item's turns in two objects: the speakers (a tuple shared by dialogues alike) and
    the texts joined in one string; a `Turn` is made when it is read."""

    __slots__ = ("_speakers", "_texts")
    _speakers: tuple[str, ...]
    _texts: str | tuple[str, ...]

    def __init__(self, turns: Iterable[Turn] = ()) -> None:
        pairs = [(turn.speaker, turn.text) for turn in turns]
        speakers = tuple(sys.intern(speaker) for speaker, _ in pairs)
        shared = _SPEAKER_ORDERS.get(speakers)
        if shared is None and len(_SPEAKER_ORDERS) < _MAX_SPEAKER_ORDERS:
            shared = _SPEAKER_ORDERS[speakers] = speakers
        texts = [text for _, text in pairs]
        joined = _SEPARATOR.join(texts)
        whole = joined.count(_SEPARATOR) == len(texts) - 1 or not texts
        object.__setattr__(self, "_speakers", shared or speakers)
        object.__setattr__(self, "_texts", joined if whole else tuple(texts))

    def _text_list(self) -> list[str] | tuple[str, ...]:
        if isinstance(self._texts, tuple):
            return self._texts
        return self._texts.split(_SEPARATOR) if self._speakers else []

    def __iter__(self) -> Iterator[Turn]:
        return map(Turn, self._speakers, self._text_list())

    def __len__(self) -> int:
        return len(self._speakers)

    @overload
    def __getitem__(self, index: int) -> Turn: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Turn, ...]: ...

    def __getitem__(self, index: int | slice) -> Turn | tuple[Turn, ...]:
        return tuple(self)[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Dialogue | tuple | list):
            return tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return repr(tuple(self))

    def __setattr__(self, name: str, value: object) -> None:
        raise TypeError("a Dialogue is immutable")

    def __reduce__(self) -> tuple[Any, ...]:
        return Dialogue, (tuple(self),)


FIELDS = (
    "id",
    "dialogue",
    "query",
    "context_audio",
    "summary",
    "group",
    "candidates",
    "human_ranking",
    "annotations",
    "relevant",
    "graded",
)
_DEFAULTS: dict[str, Any] = dict.fromkeys(FIELDS) | {"dialogue": (), "candidates": ()}


class Item:
    """One dialogue (or query) with its candidate clips and their relevance (immutable),
    validated by `Schema.Item`; `model_*` and extra keys behave as pydantic's."""

    __slots__ = (*FIELDS, "_extra", "_relevance", "_gains")
    id: str
    dialogue: Sequence[Turn]
    query: str | None
    context_audio: tuple[str, ...] | None
    summary: str | None
    group: str | None
    candidates: tuple[str, ...]
    human_ranking: tuple[str, ...] | None
    annotations: tuple[tuple[str, ...], ...] | None
    relevant: tuple[str, ...] | None
    graded: dict[str, float] | None
    _extra: dict[str, Any] | None
    _relevance: dict[str, float] | None
    _gains: NDArray[np.float64] | None

    def __init__(self, **data: Any) -> None:
        _fill(self, *_schema_fields(_validated(data), None))

    @classmethod
    def model_validate(cls, obj: Mapping[str, Any]) -> Item:
        return from_schema(_validated(obj), None)

    @classmethod
    def model_construct(cls, **values: Any) -> Item:
        """An item of `values` (defaults for the rest), unchecked."""
        fields = {name: values.get(name, _DEFAULTS[name]) for name in FIELDS}
        extra = {k: v for k, v in values.items() if k not in _DEFAULTS}
        return _new(fields, extra or None)

    def model_copy(self, *, update: Mapping[str, Any] | None = None) -> Item:
        """A copy with `update` applied (unchecked, as pydantic's)."""
        fields = {name: getattr(self, name) for name in FIELDS}
        extra = dict(self._extra or {})
        for key, value in (update or {}).items():
            (fields if key in _DEFAULTS else extra)[key] = value
        return _new(fields, extra or None)

    @property
    def model_extra(self) -> dict[str, Any]:
        return self._extra if self._extra is not None else {}

    def __getattr__(self, name: str) -> Any:
        extra = object.__getattribute__(self, "_extra") if name != "_extra" else None
        if extra is not None and name in extra:
            return extra[name]
        raise AttributeError(f"'Item' object has no attribute {name!r}")

    def __setattr__(self, name: str, value: object) -> None:
        raise TypeError(f"an Item is immutable: cannot set {name!r} (use model_copy)")

    def __delattr__(self, name: str) -> None:
        raise TypeError(f"an Item is immutable: cannot delete {name!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        return _new, ({name: getattr(self, name) for name in FIELDS}, self._extra)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Item):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in FIELDS) and (
            self.model_extra == other.model_extra
        )

    def __hash__(self) -> int:
        return hash((self.id, self.candidates))

    def __repr__(self) -> str:
        shown = [f"{n}={getattr(self, n)!r}" for n in FIELDS if getattr(self, n) != _DEFAULTS[n]]
        shown += [f"{k}={v!r}" for k, v in self.model_extra.items()]
        return f"Item({', '.join(shown)})"

    @property
    def relevance_form(self) -> RelevanceForm | None:
        if self.human_ranking is not None:
            return "human_ranking"
        if self.relevant is not None:
            return "relevant"
        return "relevance" if self.graded is not None else None

    @property
    def relevance(self) -> dict[str, float]:
        """The gain of every candidate: N - 1 - position in the human ranking, 1 or 0 for
        `relevant`, the given gains (0 where not listed) for `relevance`."""
        if self._relevance is None:
            object.__setattr__(self, "_relevance", _relevance(self))
        assert self._relevance is not None
        return self._relevance

    @property
    def gains(self) -> NDArray[np.float64]:
        """`relevance` in candidate order (read-only)."""
        if self._gains is None:
            object.__setattr__(self, "_gains", _gains(self))
        assert self._gains is not None
        return self._gains

    def dialogue_text(self) -> str:
        return "\n".join(f"{turn.speaker}: {turn.text}" for turn in self.dialogue)


def _relevance(item: Item) -> dict[str, float]:
    if item.human_ranking is not None:
        n = len(item.human_ranking)
        return {cid: n - 1 - pos for pos, cid in enumerate(item.human_ranking)}
    if item.relevant is not None:
        chosen = set(item.relevant)
        return {cid: int(cid in chosen) for cid in item.candidates}
    if item.graded is not None:
        return {cid: item.graded.get(cid, 0.0) for cid in item.candidates}
    raise ValueError(f"item {item.id} has no relevance judgement")


def _gains(item: Item) -> NDArray[np.float64]:
    n = len(item.candidates)
    given: dict[str, float]
    if item.human_ranking is not None:
        given = dict(zip(item.human_ranking, range(n - 1, -1, -1), strict=True))
    elif item.relevant is not None or item.graded is not None:
        given = dict.fromkeys(item.relevant or (), 1.0) | (item.graded or {})
    else:
        raise ValueError(f"item {item.id} has no relevance judgement")
    position = {cid: i for i, cid in enumerate(item.candidates)}
    where = [position[cid] for cid in given]
    gains = np.zeros(n)
    gains[where] = list(given.values())
    gains.flags.writeable = False
    if n > _SHARED_GAINS_MAX_LENGTH or len(_SHARED_GAINS) >= _SHARED_GAINS_MAX:
        return gains
    return _SHARED_GAINS.setdefault(gains.tobytes(), gains)


# Equal gains are one read-only array: items of a few candidates have a few dozen patterns
# (a ranking of 4: 24), and an array costs ~130 bytes per item otherwise.
_SHARED_GAINS: dict[bytes, NDArray[np.float64]] = {}
_SHARED_GAINS_MAX = 10_000
_SHARED_GAINS_MAX_LENGTH = 64


def _fill(item: Item, fields: Mapping[str, Any], extra: dict[str, Any] | None) -> None:
    for name in FIELDS:
        object.__setattr__(item, name, fields[name])
    object.__setattr__(item, "_extra", extra)
    object.__setattr__(item, "_relevance", None)
    object.__setattr__(item, "_gains", None)


def _new(fields: Mapping[str, Any], extra: dict[str, Any] | None) -> Item:
    item = object.__new__(Item)
    _fill(item, fields, extra)
    return item


def _validated(data: Mapping[str, Any]) -> Schema.Item:
    """`data` through the schema (turns given as `Turn`s are read as their fields)."""
    dialogue = data.get("dialogue")
    if isinstance(dialogue, Dialogue | tuple | list) and any(isinstance(t, Turn) for t in dialogue):
        plain = [
            {"speaker": t.speaker, "text": t.text} if isinstance(t, Turn) else t for t in dialogue
        ]
        data = {**data, "dialogue": plain}
    return Schema.Item.model_validate(data)


def from_schema(checked: Schema.Item, ids: Mapping[str, str] | None) -> Item:
    """The compact item of a validated one, candidate ids replaced by the equal strings of
    `ids` (the clips' own) where given (KeyError if one is not there)."""
    return _new(*_schema_fields(checked, ids))


def _schema_fields(
    checked: Schema.Item, ids: Mapping[str, str] | None
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    fields = {name: getattr(checked, name) for name in FIELDS}
    fields["dialogue"] = Dialogue(checked.dialogue)  # type: ignore[arg-type]  # same fields
    if ids is not None:  # KeyError: a candidate not in `ids`
        for name in ("candidates", "human_ranking", "relevant"):
            if fields[name] is not None:
                fields[name] = tuple(ids[cid] for cid in fields[name])
    return fields, dict(checked.model_extra) if checked.model_extra else None
