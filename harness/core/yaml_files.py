"""YAML files read safely and strictly: plain data only (safe loader), no key given twice, UTF-8
text, and a document whose aliases would expand to more than MAX_VALUES values (an alias bomb,
a recursive alias) refused before anything expands it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, SequenceNode

from harness.core.errors import ConfigError
from harness.core.files import read_bytes

MAX_VALUES = 100_000
_MERGE_TAG = "tag:yaml.org,2002:merge"


class _Refused(Exception):
    def __init__(self, node: Node, reason: str) -> None:
        super().__init__(reason)
        self.line = node.start_mark.line + 1
        self.reason = reason


class _StrictLoader(yaml.SafeLoader):
    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:
                continue  # `<<: *defaults` overrides on purpose
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, list | dict):
                raise _Refused(key_node, "a key must be a plain value")
            if key in seen:
                raise _Refused(key_node, f"duplicate key {key!r}")
            seen.add(key)
        return super().construct_mapping(node, deep)


def _expanded_size(node: Node, sizes: dict[int, int], path: set[int]) -> int:
    """How many values `node` stands for once every alias in it is expanded."""
    if id(node) in sizes:
        return sizes[id(node)]
    if id(node) in path:
        raise _Refused(node, "a recursive alias")
    path.add(id(node))
    size = 1
    if isinstance(node, SequenceNode):
        size += sum(_expanded_size(child, sizes, path) for child in node.value)
    elif isinstance(node, MappingNode):
        for key, value in node.value:
            size += _expanded_size(key, sizes, path) + _expanded_size(value, sizes, path)
    path.discard(id(node))
    if size > MAX_VALUES:
        raise _Refused(node, f"too many aliases: this value expands to over {MAX_VALUES:,} values")
    sizes[id(node)] = size
    return size


def yaml_text(path: Path) -> str:
    """The text of the YAML file at `path` (a regular file, UTF-8, at most 64 MiB)."""
    data = read_bytes(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError(path, f"line {line}", f"not valid UTF-8 ({exc.reason})") from None


def load_yaml(path: Path) -> Any:
    """The document of the YAML file at `path`; ConfigError names the line and the reason."""
    return parse_yaml(yaml_text(path), path)


def parse_yaml(text: str, path: Path | str) -> Any:
    """The YAML document `text` (from `path`, for the error line)."""
    try:
        loader = _StrictLoader(text)  # its reader refuses control characters at once
    except yaml.YAMLError as exc:  # e.g. "unacceptable character #x008e"
        reason = str(getattr(exc, "reason", None) or exc).splitlines()[0]
        raise ConfigError(path, None, f"not valid YAML ({reason})") from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node, {}, set())
        return loader.construct_document(node)
    except _Refused as exc:
        raise ConfigError(path, f"line {exc.line}", exc.reason) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else None
        raise ConfigError(path, where, f"not valid YAML ({getattr(exc, 'problem', exc)})") from None
    except RecursionError:
        raise ConfigError(path, None, "not valid YAML (nested too deep)") from None
    except ValueError as exc:  # e.g. an integer of more than 4,300 digits
        raise ConfigError(path, None, f"not valid YAML ({exc})") from None
    finally:
        loader.dispose()


def key_lines(text: str) -> dict[tuple[str, ...], int]:
    """The line of every mapping key and list entry of a YAML document, by its path
    (`("provider", "model")`, `("providers", "1")`); empty where the text does not parse."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return {}
    found: dict[tuple[str, ...], int] = {}

    def walk(node: Node | None, path: tuple[str, ...]) -> None:
        if isinstance(node, MappingNode):
            for key, value in node.value:
                here = (*path, str(key.value))
                found.setdefault(here, key.start_mark.line + 1)
                walk(value, here)
        elif isinstance(node, SequenceNode):
            for index, child in enumerate(node.value):
                here = (*path, str(index))
                found.setdefault(here, child.start_mark.line + 1)
                walk(child, here)

    walk(root, ())
    return found
