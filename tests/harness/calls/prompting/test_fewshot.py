"""Few-shot examples: selection, scores from the human ranking, and the leak check that keeps
an evaluated item out of its own prompt (proved where the runner prepares its calls)."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from harness.calls.cache import ResponseCache
from harness.calls.prompting.fewshot import check_no_leak, load_examples, score_ladder
from harness.config.experiment import ExperimentConfig, provider_config
from harness.core.errors import HarnessError
from harness.core.records import read_records
from harness.protocols.plans import Call
from harness.runs.runner import Runner
from tests.conftest import write_tiny_dataset


def config(dataset: Path, **fields: Any) -> ExperimentConfig:
    return ExperimentConfig(
        name="fs",
        dataset=dataset,
        provider=provider_config(name="mock"),
        prompt="few_shot",
        n_bootstrap=20,
        **fields,
    )


def prepared(cfg: ExperimentConfig, tmp_path: Path) -> list[Call]:
    runner = Runner(cfg, cache=ResponseCache(tmp_path / "cache"), results_dir=tmp_path / "r")
    return runner.prepare(runner.dataset())


def test_score_ladder_follows_the_ranking() -> None:
    assert score_ladder(4) == (8.5, 6.2, 3.8, 1.5)
    assert score_ladder(2) == (8.5, 1.5)


def test_examples_by_id_split_and_k(tiny_dataset: Path) -> None:
    (example,) = load_examples({"example_ids": ["d2"]}, tiny_dataset)
    assert example.item.id == "d2"
    # The tiny dataset ranks c2_0 first; candidates are listed in reverse.
    assert [c.id for c in example.clips] == ["c2_3", "c2_2", "c2_1", "c2_0"]
    assert example.scores == (1.5, 3.8, 6.2, 8.5)
    assert [e.item.id for e in load_examples({"k": 2}, tiny_dataset)] == ["d0", "d1"]
    custom = load_examples({"example_ids": ["d1"], "example_scores": [9, 6, 3, 0]}, tiny_dataset)
    assert custom[0].scores == (0.0, 3.0, 6.0, 9.0)

    items = [json.loads(line) for line in (tiny_dataset / "items.jsonl").read_text().splitlines()]
    items[1]["split"] = items[2]["split"] = "dev"
    (tiny_dataset / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    moved = tiny_dataset.rename(tiny_dataset.with_name("with_splits"))
    chosen = load_examples({"example_split": "dev", "k": 2}, moved)
    assert [e.item.id for e in chosen] == ["d1", "d2"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"example_ids": ["nope"]}, "example_ids: \\['nope'\\] not in"),
        ({"k": 4}, "offers 3 example item"),
        ({"example_split": "train"}, "split 'train' of"),
        ({"example_ids": ["d0"], "example_scores": [1, 2]}, "example_scores has 2 scores"),
        ({"k": 0}, "prompt_options.k"),
    ],
)
def test_bad_example_options(tiny_dataset: Path, options: dict[str, Any], message: str) -> None:
    with pytest.raises(HarnessError, match=message):
        load_examples(options, tiny_dataset)


def test_check_no_leak_by_id_and_by_dialogue(tmp_path: Path) -> None:
    evaluated_root = write_tiny_dataset(tmp_path / "eval")
    other_root = write_tiny_dataset(tmp_path / "other", n_items=4)
    evaluated = load_examples({"k": 3}, evaluated_root)
    items = [e.item for e in evaluated]
    with pytest.raises(HarnessError, match=r"few-shot example d1 .* is also evaluated"):
        check_no_leak(load_examples({"example_ids": ["d1"]}, evaluated_root), items, evaluated_root)
    # Another folder: ids d0..d2 hold the same dialogues there, so they leak too ...
    with pytest.raises(HarnessError, match=r"\(as d0\)"):
        check_no_leak(load_examples({"example_ids": ["d0"]}, other_root), items, evaluated_root)
    # ... while d3 is a dialogue the run does not evaluate.
    check_no_leak(load_examples({"example_ids": ["d3"]}, other_root), items, evaluated_root)


def test_runner_refuses_an_example_that_is_evaluated(tiny_dataset: Path, tmp_path: Path) -> None:
    cfg = config(tiny_dataset, prompt_options={"example_ids": ["d2"]})
    with pytest.raises(HarnessError, match=r"few-shot example d2 .* is also evaluated"):
        prepared(cfg, tmp_path)
    # The same example is fine when the run evaluates only d0 and d1.
    calls = prepared(cfg.model_copy(update={"limit": 2}), tmp_path)
    assert {c.item_id for c in calls} == {"d0", "d1"}


def test_runner_refuses_a_copied_dialogue_from_another_folder(
    tiny_dataset: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(tiny_dataset, copy)
    text = (copy / "items.jsonl").read_text().replace('"id": "d0"', '"id": "x0"')
    (copy / "items.jsonl").write_text(text)
    cfg = config(tiny_dataset, prompt_options={"examples": str(copy), "example_ids": ["x0"]})
    with pytest.raises(HarnessError, match=r"few-shot example x0 .*\(as d0\)"):
        prepared(cfg, tmp_path)


def test_no_prompt_of_a_run_shows_an_evaluated_item(tiny_dataset: Path, tmp_path: Path) -> None:
    examples = write_tiny_dataset(tmp_path / "examples", n_items=5)
    cfg = config(
        tiny_dataset, prompt_options={"examples": str(examples), "example_ids": ["d3", "d4"]}
    )
    calls = prepared(cfg, tmp_path)
    assert len(calls) == 12
    for call in calls:
        text = call.request.user_text  # type: ignore[union-attr]
        assert "Example 2." in text and "Hello 3" in text and "Hello 4" in text
        shown = {f"Hello {i}" for i in range(3) if f"Hello {i}\n" in text}
        assert shown == {f"Hello {call.item_id[1:]}"}  # only the item being judged


def test_few_shot_run_end_to_end(tiny_dataset: Path, tmp_path: Path) -> None:
    examples = write_tiny_dataset(tmp_path / "examples", n_items=5)
    cfg = config(tiny_dataset, prompt_options={"examples": str(examples), "example_ids": ["d4"]})
    cache = ResponseCache(tmp_path / "cache")
    try:
        runner = Runner(cfg, cache=cache, results_dir=tmp_path / "results", show_progress=False)
        result = asyncio.run(runner.run())
    finally:
        cache.close()
    assert result.complete and result.stats.calls == 12
    records = list(read_records(result.out_dir / "records.jsonl"))
    assert all(r.parse_error is None for r in records)


def copied_clips_dataset(tiny_dataset: Path, tmp_path: Path) -> Path:
    """Another folder whose items are new dialogues but whose clips are byte-identical
    copies (under new ids) of the evaluated set's clips."""
    other = write_tiny_dataset(tmp_path / "copied", n_items=5)
    for index in range(3, 5):
        for j in range(4):
            shutil.copyfile(
                tiny_dataset / "audio" / f"c{index - 3}_{j}.wav",
                other / "audio" / f"c{index}_{j}.wav",
            )
    return other


def test_runner_refuses_examples_whose_clips_are_evaluated_candidates(
    tiny_dataset: Path, tmp_path: Path
) -> None:
    other = copied_clips_dataset(tiny_dataset, tmp_path)
    options = {"examples": str(other), "example_ids": ["d3"]}
    with pytest.raises(HarnessError, match=r"few-shot example d3 .* shows clip c3_\d, whose audio"):
        prepared(config(tiny_dataset, prompt_options=options), tmp_path)
    allowed = config(tiny_dataset, prompt_options={**options, "allow_clip_overlap": True})
    assert len(prepared(allowed, tmp_path)) == 12


def test_the_shipped_few_shot_set_shares_no_clip_with_the_sample_set() -> None:
    sample, fewshot = Path("data/sample"), Path("data/sample_fewshot")
    if not (fewshot / "audio").is_dir():
        pytest.skip("make sample-audio builds data/sample_fewshot/audio")
    from harness.core.dataset import load_dataset

    evaluated = load_dataset(sample)
    examples = load_examples({"examples": str(fewshot), "k": 3}, sample)
    check_no_leak(examples, evaluated.items, sample, evaluated.clips)
