"""The shapes a cached value may have, checked on every read (the cache is untrusted): `chat`,
`scores` and `vector`; token counts are non-negative integers. Anything else is a damaged entry."""

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
    return all(
        type(name) is str
        and (not name.endswith("_tokens") or value is None or (type(value) is int and value >= 0))
        for name, value in extra.items()
    )


def well_formed(value: Any, shape: Shape | None = None, length: int | None = None) -> bool:
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


class DamagedEntry(Exception):
    """A stored value that cannot be read back as plain data."""
