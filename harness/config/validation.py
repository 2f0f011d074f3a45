"""Every mistake of an experiment file at once, each on one line with its line number (an
unknown key with the nearest known one)."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, get_args

from pydantic import BaseModel, ValidationError

from harness.config.inputs import Inputs, Pin
from harness.config.protocols import legacy_protocol
from harness.core.errors import ConfigError, ConfigErrors, did_you_mean
from providers import provider_options


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
    """One error per problem pydantic found outside the blocks `skip`, an unknown key with
    the nearest key its block takes."""
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


def validate_blocks(
    raw: dict[str, Any], path: Path | str
) -> tuple[dict[str, Any], list[Pin], list[ConfigError]]:
    """The file's settings with every provider block validated against its provider's
    options, the inputs and prompts each sweep entry pins, and every mistake of those."""
    raw, errors = dict(raw), []

    def checked(block: Any, field: str) -> Any:
        try:
            return provider_options(block, source=path, field=field)
        except ConfigErrors as exc:
            errors.extend(exc.errors)
        except ConfigError as exc:
            errors.append(exc)
        return block

    for field in ("provider", "summarizer", "user_simulator", "retriever"):
        if isinstance(raw.get(field), Mapping):
            raw[field] = checked(raw[field], field)
    rerank = raw.get("rerank")
    if isinstance(rerank, Mapping) and isinstance(rerank.get("retriever"), Mapping):
        raw["rerank"] = {**rerank, "retriever": checked(rerank["retriever"], "rerank.retriever")}
    pins: list[Pin] = []
    entries: list[Any] = list(raw["providers"]) if isinstance(raw.get("providers"), list) else []
    for i, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            pins.append(Pin())  # pydantic names the problem
            continue
        block, field = dict(entry), f"providers.{i}"
        try:
            inputs = _pinned_inputs(block.pop("inputs", None), field, path)
            prompts = _pinned_prompts(block.pop("prompts", None), field, path, raw.get("prompts"))
            pins.append(Pin(inputs, prompts))
        except ConfigError as exc:
            errors.append(exc)
        entries[i] = checked(block, field)
    if entries:
        raw["providers"] = entries
    return raw, pins, errors


def _pinned_prompts(pin: Any, field: str, path: Path | str, listed: Any) -> tuple[str, ...] | None:
    if pin is None:
        return None
    names = [pin] if isinstance(pin, str) else pin
    known = as_list(listed) if listed is not None else ["zero_shot"]
    if not isinstance(names, list) or not names or any(n not in known for n in names):
        reason = f"a list of the sweep's prompts ({', '.join(map(str, known))})"
        raise ConfigError(path, f"{field}.prompts", reason)
    return tuple(names)


def _pinned_inputs(pin: Any, field: str, path: Path | str) -> Inputs | None:
    if pin is None:
        return None
    try:
        return Inputs.model_validate(pin)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        reason = first["msg"].removeprefix("Value error, ")
        raise ConfigError(path, f"{field}.inputs.{where}", reason) from None


def legacy_note(raw: Mapping[str, Any], is_sweep: bool) -> str | None:
    """What to write instead of a protocol selected as before `protocol:` (`legacy_protocol`)."""
    runs = [raw]
    if is_sweep:
        providers, prompts = as_list(raw.get("providers")), as_list(raw.get("prompts"))
        runs = [{**raw, "provider": p, "prompt": q} for p in providers for q in prompts]
    chosen = {name for run in runs if (name := legacy_protocol(run))}
    if "describe" in chosen:
        return "prompt: describe is read as protocol: describe; write protocol: describe"
    if chosen:
        return "a rerank: block is read as protocol: rerank; add protocol: rerank"
    return None


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]
