from __future__ import annotations

from pathlib import Path

import pytest

from harness.config.loading import load_experiments
from harness.config.validation import ConfigErrors
from harness.core.errors import ConfigError


def test_single_experiment(tmp_path: Path) -> None:
    path = tmp_path / "e.yaml"
    path.write_text(
        "name: one\ndataset: data/sample\nprovider: {name: gemini, model: gemini-2.5-pro, temperature: 0.0, max_concurrency: 16}\nprompt: cot\ninputs: {dialogue: summary, music: audio}\n"
    )
    (run,) = load_experiments(path)
    assert run.provider.model == "gemini-2.5-pro" and run.provider.max_concurrency == 16
    assert run.inputs.dialogue == "summary"
    assert run.results_subdir == Path("one")


def test_sweep_expands_every_combination(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: grid\ndataset: data/sample\nproviders: [{name: mock, model: a}, {name: mock, model: b}]\n"
        "prompts: [zero_shot, cot]\ninputs: [{dialogue: full}, {dialogue: summary}]\nrepeats: 3\n"
    )
    runs = load_experiments(path)
    assert len(runs) == 8
    assert len({r.name for r in runs}) == 8
    assert all(r.sweep == "grid" and r.repeats == 3 for r in runs)
    assert runs[0].results_subdir == Path("grid", "mock_a_zero_shot_full_audio")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: x\ndataset: d\n", "provider: Field required"),
        (
            "name: x\ndataset: d\nprovider: {name: mock}\ninputs: {dialogue: gist}\n",
            "inputs.dialogue",
        ),
        ("name: x\ndataset: d\nprovider: {name: mock}\nmissing: ignore\n", "missing"),
        (
            "name: x\ndataset: d\nprovider: {name: mock}\nbogus: 1\n",
            "line 4: bogus: unknown key",
        ),
        ("name: x\n  dataset: [\n", "line 2"),
        ("- 1\n- 2\n", "expected a mapping"),
        ("name: a b\ndataset: d\nprovider: {name: mock}\n", "name"),
    ],
)
def test_errors_name_the_file_and_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_experiments(path)
    assert str(info.value).startswith(str(path))
    assert message in str(info.value)


def test_sweep_provider_may_pin_inputs(tmp_path: Path) -> None:
    path = tmp_path / "pinned.yaml"
    path.write_text(
        "name: t3\ndataset: data/sample\n"
        "providers: [{name: mock, model: a}, {name: text-embedding, inputs: {music: caption}}]\n"
        "inputs: [{dialogue: full, music: audio}, {dialogue: summary, music: audio}]\n"
    )
    runs = load_experiments(path)
    assert [(r.provider.name, r.inputs.dialogue, r.inputs.music) for r in runs] == [
        ("mock", "full", "audio"),
        ("mock", "summary", "audio"),
        ("text-embedding", "full", "caption"),
        ("text-embedding", "summary", "caption"),
    ]
    assert "inputs" not in runs[2].provider.model_dump()  # the pin is not a provider setting
    path.write_text(
        "name: t\ndataset: d\nproviders: [{name: mock, inputs: {music: midi}}]\n"
        "inputs: [{dialogue: full}, {dialogue: summary}]\n"
    )
    with pytest.raises(ConfigError, match=r"line 3: providers\.0\.inputs\.music"):
        load_experiments(path)


def test_sweep_provider_may_pin_prompts(tmp_path: Path) -> None:
    """A greedy judge on the pointwise prompt and a sampling one on the joint prompt, in one
    sweep: each entry runs only its own prompts."""
    path = tmp_path / "pinned.yaml"
    path.write_text(
        "name: t\ndataset: data/sample\nprompts: [zero_shot, joint]\n"
        "providers: [{name: mock, model: a, prompts: [zero_shot]},\n"
        "  {name: mock, model: b, temperature: 0.7, prompts: joint}, {name: mock, model: c}]\n"
    )
    runs = load_experiments(path)
    assert [(r.provider.model, r.prompt) for r in runs] == [
        ("a", "zero_shot"),
        ("b", "joint"),
        ("c", "zero_shot"),
        ("c", "joint"),
    ]
    assert "prompts" not in runs[0].provider.model_dump()
    path.write_text(
        "name: t\ndataset: d\nprompts: [zero_shot]\nproviders: [{name: mock, prompts: [cot]}]\n"
    )
    with pytest.raises(ConfigError, match=r"line 4: providers\.0\.prompts: a list of the sweep.s"):
        load_experiments(path)


def test_sweep_pin_collapses_identical_runs(tmp_path: Path) -> None:
    path = tmp_path / "pinned.yaml"
    path.write_text(
        "name: t\ndataset: d\nproviders: [{name: random, inputs: {music: caption}}]\n"
        "inputs: [{music: audio}, {music: caption}]\n"
    )
    (run,) = load_experiments(path)
    assert run.inputs.music == "caption"


def test_a_scorer_runs_once_in_a_sweep_over_prompts(tmp_path: Path) -> None:
    """A scorer reads no prompt: one run for it, not one per prompt under a colliding name."""
    path = tmp_path / "prompts.yaml"
    path.write_text(
        "name: t\ndataset: d\nproviders: [{name: mock}, {name: random}]\n"
        "prompts: [zero_shot, cot]\n"
    )
    runs = load_experiments(path)
    assert [(r.provider.name, r.prompt) for r in runs] == [
        ("mock", "zero_shot"),
        ("mock", "cot"),
        ("random", "zero_shot"),
    ]
    assert len({r.name for r in runs}) == 3


def test_a_musicrs_sweep(tmp_path: Path) -> None:
    """Cut-offs, query/audio inputs, one provider under two options, and a rerank block that
    applies to the judges only."""
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: pools\ndataset: d\n"
        "providers:\n"
        "  - {name: popularity, tie_break: order, inputs: {dialogue: query, context_audio: false}}\n"
        "  - {name: popularity, tie_break: none, inputs: {dialogue: query, context_audio: false}}\n"
        "  - {name: mock}\n"
        "prompts: [listwise]\n"
        "inputs:\n"
        "  - {dialogue: query, music: caption}\n"
        "  - {dialogue: none, music: caption, context_audio: true}\n"
        "metrics: {at: [20, 1, 5, 5]}\n"
        "protocol: rerank\n"
        "rerank: {retriever: {name: random, seed: 1}, top: 10}\n"
        "context_audio_budget: {max_clips: 4}\n"
    )
    runs = load_experiments(path)
    names = [r.name for r in runs]
    assert names[:2] == [
        "popularity_group-frequency_query_caption_tie_break-order",
        "popularity_group-frequency_query_caption_tie_break-none",
    ]
    assert len(runs) == 4  # the pinned inputs made each popularity entry one run
    assert "mock_mock-1_listwise_none_caption_context-audio" in names
    assert all(r.metrics.at == (1, 5, 20) for r in runs)
    assert all((r.rerank is not None) == (r.provider.name == "mock") for r in runs)
    judge = next(r for r in runs if r.provider.name == "mock")
    assert judge.rerank is not None and judge.rerank.retriever.seed == 1
    assert (
        judge.context_audio_budget.max_clips == 4 and judge.context_audio_budget.max_seconds == 300
    )


def test_context_audio_is_refused_for_a_scorer(tmp_path: Path) -> None:
    path = tmp_path / "e.yaml"
    path.write_text(
        "name: x\ndataset: d\nprovider: {name: random}\n"
        "inputs: {dialogue: query, music: caption, context_audio: true}\n"
    )
    with pytest.raises(ConfigError, match="context_audio goes to judges only"):
        load_experiments(path)


def test_a_retriever_block_is_checked_like_a_provider(tmp_path: Path) -> None:
    path = tmp_path / "e.yaml"
    path.write_text(
        "name: x\ndataset: d\nprovider: {name: mock}\nprompt: listwise\nprotocol: rerank\n"
        "rerank: {retriever: {name: popularity, tie_brake: order}}\n"
    )
    with pytest.raises(
        ConfigError, match=r"rerank\.retriever\.tie_brake: provider .popularity. has no"
    ):
        load_experiments(path)


def test_a_top_level_typo_names_its_line_and_the_key_meant(tmp_path: Path) -> None:
    path = tmp_path / "exp.yaml"
    path.write_text("name: x\ndataset: d\nprovider: {name: mock}\npromt: cot\n")
    with pytest.raises(ConfigError) as info:
        load_experiments(path)
    assert str(info.value) == f"{path}: line 4: promt: unknown key; did you mean 'prompt'?"


def test_a_sweep_suggests_its_own_keys(tmp_path: Path) -> None:
    path = tmp_path / "exp.yaml"
    path.write_text("name: x\ndataset: d\nproviders: [{name: mock}]\nprompt: [cot]\n")
    with pytest.raises(ConfigError, match="line 4: prompt: unknown key; did you mean 'prompts'"):
        load_experiments(path)


def test_every_mistake_of_a_file_is_reported_at_once_in_file_order(tmp_path: Path) -> None:
    path = tmp_path / "exp.yaml"
    path.write_text(
        "name: x\ndataset: d\npromt: cot\nprovider: {name: mock}\nrepeats: 0\nlimt: 3\n"
        "missing: ignore\n"
    )
    with pytest.raises(ConfigErrors) as info:
        load_experiments(path)
    assert [str(e).removeprefix(f"{path}: ") for e in info.value.errors] == [
        "line 3: promt: unknown key; did you mean 'prompt'?",
        "line 5: repeats: Input should be greater than or equal to 1",
        "line 6: limt: unknown key; did you mean 'limit'?",
        "line 7: missing: Input should be 'worst' or 'exclude'",
    ]
    assert str(info.value).count("\n") == 3  # one line each


def test_a_provider_option_error_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "exp.yaml"
    path.write_text("name: x\ndataset: d\nprovider:\n  name: random\n  sed: 3\n")
    with pytest.raises(ConfigError, match=r"line 5: provider\.sed: provider 'random' has no"):
        load_experiments(path)


def test_a_key_that_matches_nothing_gets_no_suggestion(tmp_path: Path) -> None:
    path = tmp_path / "exp.yaml"
    path.write_text("name: x\ndataset: d\nprovider: {name: mock}\nzzzz: 1\n")
    with pytest.raises(ConfigError) as info:
        load_experiments(path)
    assert str(info.value).endswith("line 4: zzzz: unknown key")
