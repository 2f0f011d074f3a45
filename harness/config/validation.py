"""Every mistake of an experiment file at once, each on one line with its line number: an
unknown key with the nearest known one (`promt` -> did you mean `prompt`?), and every field
pydantic refuses."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, get_args

from pydantic import BaseModel, ValidationError

from harness.core.errors import ConfigError, ConfigErrors, did_you_mean


def raise_all(errors: Sequence[ConfigError]) -> None:
    """Raise the errors found, if any: one as itself, several together in file order."""
    errors = sorted(errors, key=_line)
    if len(errors) == 1:
        raise errors[0] from None
    if errors:
        raise ConfigErrors(errors) from None


def _line(error: ConfigError) -> int:
    found = re.match(r"line (\d+)", error.field or "")
    return int(found.group(1)) if found else 0


def where(loc: Sequence[Any], lines: Mapping[tuple[str, ...], int]) -> str:
    """`line 5: prompt` for a field path, using the line of its longest known prefix."""
    path = tuple(str(p) for p in loc)
    field = ".".join(path) or "(top level)"
    for end in range(len(path), 0, -1):
        if path[:end] in lines:
            return f"line {lines[path[:end]]}: {field}"
    return field


def unknown_keys(
    raw: Mapping[str, Any],
    known: Iterable[str],
    source: Path | str,
    lines: Mapping[tuple[str, ...], int],
) -> list[ConfigError]:
    """One error per top-level key the file's kind (single run or sweep) does not take."""
    allowed = set(known)
    return [
        ConfigError(source, where([key], lines), "unknown key" + did_you_mean(str(key), allowed))
        for key in raw
        if str(key) not in allowed
    ]


def validation_errors(
    exc: ValidationError,
    source: Path | str,
    lines: Mapping[tuple[str, ...], int],
    model: type[BaseModel],
    skip: Collection[str] = (),
) -> list[ConfigError]:
    """One error per problem pydantic found in `model`'s fields but those of `skip` (given
    where those blocks were left out of the validation); an unknown key of a nested block with
    the nearest key it takes."""
    found = []
    for error in exc.errors():
        loc = error["loc"]
        if (loc[0] in skip) if loc else bool(skip):  # a check across fields missed a block
            continue
        reason = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            reason = "unknown key" + did_you_mean(str(loc[-1]), _keys_at(model, loc[:-1]))
        found.append(ConfigError(source, where(loc, lines), reason))
    return found


def _keys_at(model: type[BaseModel], loc: Sequence[Any]) -> set[str]:
    """The keys the block at `loc` of `model` takes (a list's index steps into its entries)."""
    models = [model]
    for part in loc:
        if isinstance(part, str):
            fields = [m.model_fields[part] for m in models if part in m.model_fields]
            models = [m for field in fields for m in _models_in(field.annotation)]
    return {key for m in models for key in m.model_fields}


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models_in(arg)]


def located(error: ConfigError, lines: Mapping[tuple[str, ...], int]) -> ConfigError:
    """The error with the line of its field (`prompt` -> `line 4: prompt`) when known."""
    if not error.field or error.field.startswith("line "):
        return error
    return ConfigError(error.path, where(error.field.split("."), lines), error.reason)
