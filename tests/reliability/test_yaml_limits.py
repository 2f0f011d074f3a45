"""Experiment files are read strictly and with bounds: an alias bomb (9 levels of 9) or a
recursive alias is refused in milliseconds, before anything expands it; a key given twice
is refused; ordinary anchors and merge keys still work."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import pytest

from harness.core.errors import ConfigError
from harness.core.yaml_files import MAX_VALUES, load_yaml


def _bomb(levels: int) -> str:
    names = "abcdefghijkl"[:levels]
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    for prev, cur in itertools.pairwise(names):
        lines.append(f"{cur}: &{cur} [" + ", ".join([f"*{prev}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_at_once(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(_bomb(9))
    started = time.monotonic()
    with pytest.raises(ConfigError, match="too many aliases"):
        load_yaml(path)
    assert time.monotonic() - started < 2.0


def test_a_recursive_alias_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "loop.yaml"
    path.write_text("a: &a [1, *a]\n")
    with pytest.raises(ConfigError, match="line 1: a recursive alias"):
        load_yaml(path)


def test_moderate_anchors_and_merge_keys_still_work(tmp_path: Path) -> None:
    path = tmp_path / "ok.yaml"
    path.write_text(
        "defaults: &defaults {name: mock, temperature: 0.0}\n"
        "provider:\n  <<: *defaults\n  temperature: 0.5\n" + _bomb(4)
    )
    loaded = load_yaml(path)
    assert loaded["provider"] == {"name": "mock", "temperature": 0.5}
    assert len(loaded["d"]) == 9 and MAX_VALUES > 9**4


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a: 1\nb: 2\na: 3\n", "line 3: duplicate key 'a'"),
        ("p:\n  x: 1\n  x: 1\n", "line 3: duplicate key 'x'"),
        ("n: " + "9" * 5000 + "\n", "not valid YAML"),
        ("a: " + "[" * 5000 + "]" * 5000 + "\n", "not valid YAML"),
    ],
)
def test_ambiguous_or_oversized_values_are_refused(
    text: str, expected: str, tmp_path: Path
) -> None:
    path = tmp_path / "x.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=expected):
        load_yaml(path)
