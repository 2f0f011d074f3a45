"""Run labels: the user's `label:` (per provider block or per run), else only what tells
the compared runs apart; unique, and shortened for narrow places without ever colliding."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from harness.cli.main import app
from harness.config.experiment import provider_config
from harness.config.loading import load_experiments
from harness.reports.formatting import markdown_table
from harness.reports.labels import generated_labels, shorten_unique
from providers import create_provider
from tests.conftest import load_runs

runner = CliRunner()


@given(
    st.lists(st.text(min_size=1, max_size=60), min_size=1, max_size=12, unique=True),
    st.integers(min_value=5, max_value=40),
)
def test_shortened_labels_stay_unique_and_fit(labels: list[str], width: int) -> None:
    short = shorten_unique(labels, width)
    assert len(set(short)) == len(labels)
    assert all(len(s) <= width for s in short)
    assert all(s == label for s, label in zip(short, labels, strict=True) if len(label) <= width)


def test_labels_cut_to_the_same_text_are_told_apart() -> None:
    labels = [
        "gemini_gemini-2.5-pro_zero_shot_full_audio",
        "gemini_gemini-2.5-pro_cot_full_audio",
        "gemini_gemini-2.5-pro_few_shot_full_audio",
    ]
    short = shorten_unique(labels, 14)
    assert len(set(short)) == 3, short


def _config(model: str, prompt: str, provider: str = "gemini", **extra: str) -> dict[str, object]:
    return {
        "provider": {"name": provider, "model": model},
        "prompt": prompt,
        "inputs": {"dialogue": "full", "music": "audio"},
        **extra,
    }


def test_generated_labels_say_only_what_differs() -> None:
    configs = [
        _config("gemini-2.5-pro", "zero_shot"),
        _config("gemini-2.5-pro", "cot"),
        _config("gpt-4o-audio-preview", "cot", provider="openai-audio"),
        _config("gemini-2.5-pro", "cot", label="Pro, thinking"),
    ]
    names = [f"run{i}" for i in range(4)]
    labels = generated_labels(configs, names, ["t7"] * 4)
    assert labels == [
        "gemini-2.5-pro · zero_shot",
        "gemini-2.5-pro · cot",
        "gpt-4o-audio-preview · cot",
        "Pro, thinking",
    ]
    same = generated_labels([_config("m", "cot")] * 3, ["a", "b", "c"], ["x", "y", "y"])
    assert same == ["m (x)", "m (y)", "m (y) #2"]
    # The provider goes in front only of a model name two providers share.
    shared = [_config("m", "cot"), _config("m", "cot", provider="openai-audio")]
    assert generated_labels(shared, ["a", "b"], ["x", "x"]) == ["gemini:m", "openai-audio:m"]


def test_label_in_a_provider_block_names_the_runs(tiny_dataset: Path, tmp_path: Path) -> None:
    experiment = tmp_path / "sweep.yaml"
    experiment.write_text(
        f"name: sweep\ndataset: {tiny_dataset}\nn_bootstrap: 20\nproviders:\n"
        "  - {name: mock, model: a, label: Mock cold}\n"
        "  - {name: mock, model: a, temperature: 0.5, label: Mock hot}\n"
    )
    configs = load_experiments(experiment)  # same model: the labels tell the runs apart
    assert [c.name for c in configs] == [
        "mock_Mock-cold_zero_shot_full_audio",
        "mock_Mock-hot_zero_shot_full_audio",
    ]
    args = ["run", str(experiment), "--results-dir", str(tmp_path / "results"), "--no-progress"]
    assert runner.invoke(app, [*args, "--cache-dir", str(tmp_path / "cache")]).exit_code == 0
    runs = load_runs(sorted((tmp_path / "results" / "sweep").glob("*_audio")))
    assert [run.label for run in runs] == ["Mock cold", "Mock hot"]
    # A label changes how runs are shown, never which answers the cache holds for them.
    plain = create_provider(provider_config("mock", model="a")).identity()
    assert create_provider(provider_config("mock", model="a", label="x")).identity() == plain


def test_a_run_label_is_used_as_is(tiny_dataset: Path, tmp_path: Path) -> None:
    experiment = tmp_path / "one.yaml"
    experiment.write_text(
        f"name: one\nlabel: My judge\ndataset: {tiny_dataset}\nn_bootstrap: 20\n"
        "provider: {name: mock}\n"
    )
    args = ["run", str(experiment), "--results-dir", str(tmp_path / "results"), "--no-progress"]
    assert runner.invoke(app, [*args, "--cache-dir", str(tmp_path / "cache")]).exit_code == 0
    other = tmp_path / "results" / "one"
    (run,) = load_runs([other])
    assert run.label == "My judge"


def test_a_scorer_is_labelled_without_a_prompt_it_never_reads() -> None:
    caption = {"dialogue": "full", "music": "caption"}
    configs = [
        {
            "provider": {"name": "text-embedding", "model": "all-MiniLM-L6-v2"},
            "prompt": "zero_shot",
            "inputs": caption,
        },
        {
            "provider": {"name": "gemini", "model": "gemini-2.5-flash"},
            "prompt": "zero_shot",
            "inputs": caption,
        },
        {
            "provider": {"name": "gemini", "model": "gemini-2.5-flash"},
            "prompt": "cot",
            "inputs": caption,
        },
    ]
    assert generated_labels(configs, ["a", "b", "c"], ["s", "s", "s"]) == [
        "all-MiniLM-L6-v2",
        "gemini-2.5-flash · zero_shot",
        "gemini-2.5-flash · cot",
    ]


def test_runs_differing_only_in_a_provider_option_are_labelled_by_it() -> None:
    query = {"dialogue": "query", "music": "caption"}
    configs = [
        {
            "provider": {"name": "popularity", "tie_break": "order"},
            "prompt": "listwise",
            "inputs": query,
        },
        {
            "provider": {"name": "popularity", "tie_break": "none"},
            "prompt": "listwise",
            "inputs": query,
        },
        {"provider": {"name": "random", "model": "uniform"}, "prompt": "listwise", "inputs": query},
    ]
    assert generated_labels(configs, ["a", "b", "c"], ["musicrs"] * 3) == [
        "popularity · tie_break=order",
        "popularity · tie_break=none",
        "uniform",
    ]


@given(st.lists(st.lists(st.text(max_size=8), min_size=3, max_size=3), max_size=4))
def test_a_markdown_row_has_its_cells_whatever_they_hold(rows: list[list[str]]) -> None:
    """Issue 48: a `|` (or a line break) in a label broke its comparison.md row."""
    lines = markdown_table(["a", "b", "c"], rows).split("\n")
    assert len(lines) == 2 + len(rows)
    for line in lines:
        assert len(re.split(r"(?<!\\)\|", line)) == 5, line


def test_a_label_holding_a_pipe_keeps_its_comparison_row(
    tiny_dataset: Path, tmp_path: Path
) -> None:
    experiment = tmp_path / "sweep.yaml"
    experiment.write_text(
        f"name: sweep\ndataset: {tiny_dataset}\nn_bootstrap: 20\nproviders:\n"
        "  - {name: mock, model: a, label: 'cold | A'}\n"
        "  - {name: mock, model: a, temperature: 0.5, label: hot}\n"
    )
    args = ["run", str(experiment), "--results-dir", str(tmp_path / "results"), "--no-progress"]
    assert runner.invoke(app, [*args, "--cache-dir", str(tmp_path / "cache")]).exit_code == 0
    sweep, out = tmp_path / "results" / "sweep", tmp_path / "report"
    assert runner.invoke(app, ["report", str(sweep), "--out", str(out), "--no-html"]).exit_code == 0
    markdown = (out / "comparison.md").read_text()
    for table in re.findall(r"(?:^\|.*\n)+", markdown, re.M):  # each row has its header's cells
        assert len({len(re.split(r"(?<!\\)\|", row)) for row in table.splitlines()}) == 1, table
    assert "\n| cold \\| A | mock |" in markdown, markdown
