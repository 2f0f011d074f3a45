"""What a response-cache value may be, checked each time one is read back: the cache is a file
the harness wrote earlier, so it is read as untrusted (a damaged disk, an older harness, a
shared cache someone else wrote). A value of any other shape is a damaged entry: a miss,
counted and asked again (`harness.calls.cache.ResponseCache.get`).

Three shapes are stored: a judge's answer (`chat`: `text`, token counts, `latency_s`,
`extra`), a scorer's answer (`scores`: one number per candidate, `extra`) and an embedding
(`vector`). Token counts are non-negative integers (never booleans or strings), including
the `*_tokens` counts in `extra` that pricing sums. `bounded` keeps a value that would
expand beyond any answer's size (shared references in an old pickle, a value that holds
itself) from ever being walked. A value an older harness pickled is read as plain data only
(`harness.core.files.plain_pickle`): no name is ever resolved, so nothing can be called."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, ValidationError

Shape = Literal["chat", "scores", "vector"]


Count = Annotated[StrictInt, Field(ge=0)]
Number = StrictInt | StrictFloat


class _Value(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    extra: dict[str, Any] = Field(default_factory=dict)
    latency_s: Annotated[Number, Field(ge=0)] | None = None


class _Chat(_Value):
    text: str
    input_tokens: Count | None = None
    output_tokens: Count | None = None


class _Scores(_Value):
    scores: list[Number]


class _Vector(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    vector: list[Number]


_MODELS: dict[Shape, type[BaseModel]] = {"chat": _Chat, "scores": _Scores, "vector": _Vector}


def _counts_ok(extra: dict[str, Any]) -> bool:
    """`extra` is named by strings, and its `*_tokens` counts are non-negative integers
    (pricing adds them up)."""
    return all(
        type(name) is str and (not name.endswith("_tokens") or value is None or _count(value))
        for name, value in extra.items()
    )


def _count(value: Any) -> bool:
    return type(value) is int and value >= 0


def well_formed(value: Any, shape: Shape | None = None, length: int | None = None) -> bool:
    """Whether `value` is a stored value of `shape` (any of the three when None) with
    `length` scores when that is given."""
    if not isinstance(value, dict):
        return False
    shapes: tuple[Shape, ...] = (shape,) if shape else ("chat", "scores", "vector")
    for name in shapes:
        try:
            _MODELS[name].model_validate(value)
        except ValidationError:
            continue
        extra = value.get("extra") or {}
        if not isinstance(extra, dict) or not _counts_ok(extra):  # (a vector declares none)
            return False
        return length is None or name != "scores" or len(value["scores"]) == length
    return False


# ------------------------------------------------------------------ what cannot be read
class DamagedEntry(Exception):
    """A stored value that cannot be read back as plain data."""
