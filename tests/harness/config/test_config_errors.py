"""Experiment-file errors as even as the top-level ones (issue 47, #8 and #9): every mistake
of a file at once, nested ones included, each with its line; an entry of `providers:` by its
index; a did-you-mean for nested keys, provider names and option names; and `--set prompt=`
on a sweep."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config.loading import load_experiments
from harness.config.validation import ConfigErrors

SWEEP = """name: bad
dataset: d
metrics: {att: [1, 5]}
repeats: 0
providers:
  - {name: random, seed: 1}
  - {name: gemni, model: x}
  - {name: gemini, temprature: 0.3, max_concurency: 2}
  - name: random
    sed: 3
inputs:
  - {dialogue: summary, musik: caption}
"""


def errors_of(path: Path) -> list[str]:
    with pytest.raises(ConfigErrors) as info:
        load_experiments(path)
    return [str(error).removeprefix(f"{path}: ") for error in info.value.errors]


def test_every_nested_mistake_is_reported_with_its_line_and_the_key_meant(
    tmp_path: Path,
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(SWEEP)
    assert errors_of(path) == [
        "line 3: metrics.att: unknown key; did you mean 'at'?",
        "line 4: repeats: Input should be greater than or equal to 1",
        "line 7: providers.1.name: unknown provider 'gemni'; did you mean 'gemini'?",
        "line 8: providers.2.temprature: provider 'gemini' has no option 'temprature'; "
        "did you mean 'temperature'?",
        "line 8: providers.2.max_concurency: provider 'gemini' has no option "
        "'max_concurency'; did you mean 'max_concurrency'?",
        "line 10: providers.3.sed: provider 'random' has no option 'sed'; did you mean 'seed'?",
        "line 12: inputs.0.musik: unknown key; did you mean 'music'?",
    ]


def test_a_single_runs_provider_block_gets_the_same(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\ndataset: d\nprovider: {name: gemni}\nrefine: {feedbak: aspects}\n")
    assert errors_of(path) == [
        "line 3: provider.name: unknown provider 'gemni'; did you mean 'gemini'?",
        "line 4: refine.feedbak: unknown key; did you mean 'feedback'?",
    ]


def test_set_prompt_on_a_sweep_runs_that_prompt(tmp_path: Path) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text("name: s\ndataset: d\nproviders: [{name: mock}]\nprompts: [cot, listwise]\n")
    runs = load_experiments(path, overrides=["prompt=zero_shot"])
    assert [run.prompt for run in runs] == ["zero_shot"]
    path.write_text("name: s\ndataset: d\nproviders: [{name: mock}]\n")  # no prompts: given
    assert [run.prompt for run in load_experiments(path, overrides=["prompt=cot"])] == ["cot"]
