"""Run labels for tables and figures: the user's `label:` where given (a run's, or its
provider block's), else only what tells the compared runs apart (the model, the prompt, the
inputs) instead of the full run name; always unique, and shortened for narrow places
without ever making two labels the same."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from providers import REGISTRY

ELLIPSIS = "…"


def _model_part(config: Mapping[str, Any]) -> tuple[str, str]:
    """(provider name, what names the model: the provider's label, else its model)."""
    provider: Mapping[str, Any] = config.get("provider") or {}
    name = str(provider.get("name") or "")
    if provider.get("label"):
        return name, str(provider["label"])
    if name == "predictions":  # your own predictions: the file's or folder's name
        return name, str(provider.get("model") or config.get("name"))
    return name, str(provider.get("model") or name or config.get("name") or "?")


def _models(configs: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each run's model, with its provider in front where two providers use that name."""
    parts = [_model_part(c) for c in configs]
    providers_of: dict[str, set[str]] = {}
    for provider, model in parts:
        providers_of.setdefault(model, set()).add(provider)
    return [
        f"{provider}:{model}" if len(providers_of[model]) > 1 else model
        for provider, model in parts
    ]


def _inputs(config: Mapping[str, Any]) -> str | None:
    inputs = config.get("inputs")
    if not isinstance(inputs, Mapping):
        return None
    return f"{inputs.get('dialogue', 'full')}/{inputs.get('music', 'audio')}"


def generated_labels(
    configs: Sequence[Mapping[str, Any]], names: Sequence[str], folders: Sequence[str]
) -> list[str]:
    """A label per run: its own `label:`, else the parts of its setup that differ between
    the runs compared (model or provider label, prompt, inputs), else its name; made unique
    with the folder it sits in (the sweep's), then a number."""
    models = _models(configs)
    parts = [
        (model, c.get("prompt") if _reads_a_prompt(c) else None, _inputs(c))
        for model, c in zip(models, configs, strict=True)
    ]
    # A setting varies when two runs that have it differ (your predictions have neither a
    # prompt nor inputs).
    varying = [len({p[i] for p in parts if p[i] is not None}) > 1 for i in range(3)]
    if not any(varying):
        varying[0] = True
    labels = []
    for config, name, setup in zip(configs, names, parts, strict=True):
        if config.get("label"):
            labels.append(str(config["label"]))
            continue
        shown = [str(p) for p, vary in zip(setup, varying, strict=True) if vary and p]
        labels.append(" · ".join(shown) if len(configs) > 1 and shown else name)
    labels = _with_differing_options(labels, configs)
    labels = [
        f"{label} ({folder})" if folder and labels.count(label) > 1 else label
        for label, folder in zip(labels, folders, strict=True)
    ]
    return unique(labels)


def _reads_a_prompt(config: Mapping[str, Any]) -> bool:
    """A judge reads the run's prompt; a scorer never does (its runs name none)."""
    provider = config.get("provider") or {}
    entry = REGISTRY.get(str(provider.get("name"))) if isinstance(provider, Mapping) else None
    return entry is None or entry.kind == "judge"


def _with_differing_options(labels: list[str], configs: Sequence[Mapping[str, Any]]) -> list[str]:
    """Runs whose labels are equal get the provider options in which they differ
    (`popularity · tie_break=order`, `popularity · tie_break=none`)."""
    out = list(labels)
    for label in set(labels):
        rows = [i for i, other in enumerate(labels) if other == label]
        if len(rows) < 2:
            continue
        blocks = [configs[i].get("provider") or {} for i in rows]
        keys = sorted({str(k) for block in blocks for k in block} - {"name", "model", "label"})
        differing = [k for k in keys if len({repr(block.get(k)) for block in blocks}) > 1]
        for i, block in zip(rows, blocks, strict=True):
            shown = " ".join(f"{k}={block.get(k)}" for k in differing)
            if shown:
                out[i] = f"{label} · {shown}"
    return out


def unique(labels: Sequence[str]) -> list[str]:
    """The labels, the second and later of equal ones numbered: "a", "a #2", "a #3"."""
    taken: set[str] = set()
    out = []
    for label in labels:
        candidate, n = label, 1
        while candidate in taken:
            n += 1
            candidate = f"{label} #{n}"
        taken.add(candidate)
        out.append(candidate)
    return out


def short(label: str, width: int) -> str:
    """The label cut in the middle to `width` characters (it stays whole if it fits)."""
    if len(label) <= width:
        return label
    head = (width - 1) // 2
    return label[:head] + ELLIPSIS + label[len(label) - (width - 1 - head) :]


def shorten_unique(labels: Sequence[str], width: int) -> list[str]:
    """Each (unique) label in at most `width` characters, no two the same: labels that fit
    stay whole; a cut that would collide tries other head/tail splits, then a number."""
    if width < 5:
        raise ValueError("labels need at least 5 characters to stay unique")
    if len(set(labels)) != len(labels):
        raise ValueError("labels must be unique before they are shortened")
    cuts = [short(label, width) for label in labels]
    taken = {label for label in labels if len(label) <= width}
    out = []
    for label, cut in zip(labels, cuts, strict=True):
        if len(label) <= width:
            out.append(label)
            continue
        if cut not in taken and cuts.count(cut) == 1:
            choice = cut
        else:
            splits = (
                label[:head] + ELLIPSIS + label[len(label) - (width - 1 - head) :]
                for head in range(width - 2, 0, -1)
            )
            choice = next((s for s in splits if s not in taken and s not in cuts), "")
            n = 1
            while not choice or choice in taken:
                n += 1
                suffix = f"{ELLIPSIS}{n}"
                choice = label[: width - len(suffix)] + suffix
        taken.add(choice)
        out.append(choice)
    return out
