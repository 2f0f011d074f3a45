"""`--set KEY=VALUE` overrides of an experiment file, applied to its raw settings before they
are validated like the file."""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from typing import Any

from harness.core.errors import ConfigError
from harness.core.yaml_files import parse_yaml


def apply_overrides(raw: dict[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """The settings with each `KEY=VALUE` applied: KEY a dotted path, VALUE read as YAML; on a
    sweep `provider.KEY` sets every entry's KEY, and `prompt=NAME` runs that prompt alone."""
    raw = copy.deepcopy(raw)
    for override in overrides:
        key, sep, text = override.partition("=")
        path = [part for part in key.strip().split(".")]
        if not sep or not all(path):
            raise ConfigError(
                "--set", override, "expected KEY=VALUE, e.g. provider.model=gemini-2.5-flash"
            )
        try:
            value = parse_yaml(text, "--set")
        except ConfigError as exc:
            reason = f"the value is not valid YAML ({exc.reason})"
            raise ConfigError("--set", override, reason) from None
        sweep = "provider" not in raw and isinstance(raw.get("providers"), list)
        if sweep and path[0] == "provider":
            targets = [["providers", str(i), *path[1:]] for i in range(len(raw["providers"]))]
        elif sweep and path == ["prompt"]:
            targets, value = [["prompts"]], value if isinstance(value, list) else [value]
        else:
            targets = [path]
        for target in targets:
            _set(raw, target, value, override)
    return raw


def _set(node: Any, path: list[str], value: Any, override: str) -> None:
    for depth, part in enumerate(path):
        last = depth == len(path) - 1
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                reason = f"{'.'.join(path[:depth])} has {len(node)} entries; {part!r} is not one"
                raise ConfigError("--set", override, reason)
            index: int | str = int(part)
        elif isinstance(node, dict):
            index = part
        else:
            reason = f"{'.'.join(path[:depth])} is a single value, not a block with keys"
            raise ConfigError("--set", override, reason)
        if last:
            node[index] = value
        else:
            if isinstance(node, dict) and not isinstance(node.get(part), dict | list):
                node[part] = {}
            node = node[index]


def flag_experiment(
    dataset: str | None, providers: Sequence[str], prompts: Sequence[str]
) -> dict[str, Any]:
    """The experiment `harness run --dataset D --provider NAME[:MODEL] --prompt P` runs without
    a file: one run, or a sweep when a flag is repeated (named after the dataset folder)."""
    if not dataset or not providers:
        raise ConfigError(
            "harness run", None, "give an experiment file, or --dataset and --provider"
        )
    blocks = [
        dict(zip(("name", "model"), given.split(":", 1), strict=False)) for given in providers
    ]
    if len(blocks) > 1 or len(prompts) > 1:
        name = dataset.rstrip("/").rpartition("/")[2] or "runs"
        sweep = {"name": name, "dataset": dataset, "providers": blocks}
        return sweep | ({"prompts": list(prompts)} if prompts else {})
    parts = [*blocks[0].values(), *prompts]
    settings = {"name": re.sub(r"[^A-Za-z0-9_.\-]+", "-", "_".join(parts)), "dataset": dataset}
    return settings | {"provider": blocks[0]} | ({"prompt": prompts[0]} if prompts else {})
