"""`protocol:` is the one selector (`harness.config.protocols`): each registered protocol by
name, its prompt given for it, a clear line for a name or a provider it does not take; the
older selectors (`prompt: describe`, a `rerank:` block) still read, with a one-line note, in
experiment files and in the config.yaml of run folders made before."""

from __future__ import annotations

import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import yaml

from harness.config.loading import load_experiments
from harness.config.protocols import PROTOCOLS, protocol_of
from harness.core.errors import ConfigError, DeprecatedSetting
from harness.runs.run_folder import check_run_folder

RETRIEVER = "rerank: {retriever: {name: random, seed: 1}, top: 2}\n"


def load(tmp_path: Path, text: str) -> tuple[list[tuple[str, str, str]], list[str]]:
    """(name, protocol, prompt) of each run, and the notes given while loading."""
    path = tmp_path / "e.yaml"
    path.write_text("name: x\ndataset: d\n" + text)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runs = load_experiments(path)
    notes = [str(w.message) for w in caught if issubclass(w.category, DeprecatedSetting)]
    return [(r.name, r.protocol, r.prompt) for r in runs], notes


def test_the_registry_holds_the_four_protocols() -> None:
    assert list(PROTOCOLS)[:4] == ["rank", "refine", "describe", "rerank"]
    assert PROTOCOLS["describe"].kinds == ("judge",) and PROTOCOLS["describe"].prompt == "describe"


def test_protocol_selects_and_gives_its_prompt(tmp_path: Path) -> None:
    assert load(tmp_path, "provider: {name: mock}\nprotocol: describe\n") == (
        [("x", "describe", "describe")],
        [],
    )
    runs, notes = load(tmp_path, "provider: {name: mock}\nprotocol: rerank\n" + RETRIEVER)
    assert runs == [("x", "rerank", "zero_shot")] and notes == []


def test_the_older_selectors_still_read_with_a_note(tmp_path: Path) -> None:
    runs, notes = load(tmp_path, "provider: {name: mock}\nprompt: describe\n")
    assert runs == [("x", "describe", "describe")]
    assert notes == [
        f"{tmp_path / 'e.yaml'}: prompt: describe is read as protocol: describe; "
        "write protocol: describe"
    ]
    runs, notes = load(tmp_path, "provider: {name: mock}\n" + RETRIEVER)
    assert runs == [("x", "rerank", "zero_shot")] and "add protocol: rerank" in notes[0]
    sweep = "providers: [{name: mock}, {name: random}]\nprompts: [zero_shot, describe]\n"
    runs, notes = load(tmp_path, sweep)
    assert [(protocol, prompt) for _, protocol, prompt in runs] == [
        ("rank", "zero_shot"),
        ("describe", "describe"),
        ("rank", "zero_shot"),  # the scorer, once
    ]
    assert len(notes) == 1


def test_a_sweep_runs_its_protocol_where_the_kind_allows(tmp_path: Path) -> None:
    sweep = "providers: [{name: mock}, {name: random}]\nprotocol: describe\n"
    runs, notes = load(tmp_path, sweep)
    assert [(p, q) for _, p, q in runs] == [("describe", "describe"), ("rank", "zero_shot")]
    assert runs[0][0] == "mock_mock-1_describe_full_audio" and notes == []


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("provider: {name: mock}\nprotocol: refin\n", "unknown protocol 'refin' (known: rank,"),
        ("provider: {name: random}\nprotocol: describe\n", "runs a judge, and random is a scorer"),
        ("provider: {name: mock}\nprotocol: rerank\n", "rerank and its rerank: {retriever, top}"),
        ("provider: {name: mock}\nprotocol: refine\n" + RETRIEVER, "rerank: {retriever, top}"),
        ("provider: {name: mock}\nprotocol: describe\nprompt: cot\n", "asks with prompt: desc"),
        ("provider: {name: mock}\nprotocol: refine\nprompt: describe\n", "goes with protocol"),
    ],
)
def test_a_protocol_that_does_not_fit_is_one_line(tmp_path: Path, text: str, reason: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(reason)) as info:
        load(tmp_path, text)
    assert "\n" not in str(info.value)


def test_a_run_folder_of_before_protocol_reads_as_its_protocol(tmp_path: Path) -> None:
    """A describe run's config.yaml said `protocol: rank` and `prompt: describe`: reports
    read it as a describe run, and the same experiment re-run into it is the same run."""
    path = tmp_path / "e.yaml"
    path.write_text("name: x\ndataset: d\nprovider: {name: mock}\nprotocol: describe\n")
    (config,) = load_experiments(path)
    saved = config.model_dump(mode="json") | {"protocol": "rank"}
    assert protocol_of(saved).name == "describe"
    assert protocol_of({"provider": {"name": "random"}, "prompt": "describe"}).name == "rank"
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.yaml").write_text(yaml.safe_dump(saved))
    check_run_folder(tmp_path / "run", config)  # not "another configuration"


@pytest.mark.slow
def test_the_command_line_prints_the_note_as_one_line(tmp_path: Path) -> None:
    path = tmp_path / "e.yaml"
    sample = Path(__file__).parents[3] / "data" / "sample"
    path.write_text(f"name: x\ndataset: {sample}\nprovider: {{name: mock}}\nprompt: describe\n")
    result = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", str(path), "--dry-run"],
        capture_output=True,
        text=True,
        check=False,
    )
    notes = [line for line in result.stderr.splitlines() if line.startswith("warning")]
    note = (
        f"warning: {path}: prompt: describe is read as protocol: describe; write protocol: describe"
    )
    assert notes == [note], result.stderr
