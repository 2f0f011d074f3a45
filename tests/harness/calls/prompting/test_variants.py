"""Prompt variants: what each one sends (audio or not, JSON schema), its options, and the
joint variant's presentation order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.calls.prompting.variants import VARIANTS, PreparedCall, PromptContext, get_variant
from harness.config.experiment import provider_config
from harness.core.dataset import Dataset, load_dataset
from harness.core.errors import HarnessError


@pytest.fixture
def data(tiny_dataset: Path) -> Dataset:
    return load_dataset(tiny_dataset)


def prepare(
    data: Dataset, variant: str, music: str = "audio", repeat: int = 0, **options: Any
) -> list[PreparedCall]:
    item = data.items[0]
    ctx = PromptContext(
        item=item,
        clips=data.clips,
        dialogue_mode="full",
        music_mode=music,  # type: ignore[arg-type]
        summary=None,
        repeat=repeat,
        options=options,
    )
    return get_variant(variant).prepare(ctx)


def audio_ids(call: PreparedCall) -> list[str]:
    return [p.clip_id for p in call.prompt.parts if not isinstance(p, str)]


@pytest.mark.parametrize("name", ["zero_shot", "cot", "rubric"])
def test_pointwise_variants_send_one_clip_per_call(data: Dataset, name: str) -> None:
    calls = prepare(data, name)
    assert [c.candidates for c in calls] == [(cid,) for cid in data.items[0].candidates]
    assert [audio_ids(c) for c in calls] == [[cid] for cid in data.items[0].candidates]


def test_json_mode_everywhere_except_chain_of_thought(data: Dataset) -> None:
    schemas = {
        name: prepare(data, name, "caption")[0].schema for name in VARIANTS if name != "few_shot"
    }
    assert schemas.pop("cot") is None
    assert all(schema is not None for schema in schemas.values())
    assert set(schemas["rubric"]["required"]) == {"A", "B", "C", "vocals"}  # type: ignore[index]


def test_text_only_sends_captions_and_no_audio(data: Dataset) -> None:
    calls = prepare(data, "text_only", "caption")
    assert all(audio_ids(c) == [] for c in calls)
    caption = data.clips[calls[0].candidates[0]].caption
    assert caption in "".join(p for p in calls[0].prompt.parts if isinstance(p, str))
    with pytest.raises(HarnessError, match=r"set inputs\.music: caption"):
        prepare(data, "text_only", "audio")


def test_caption_mode_sends_no_audio_with_any_variant(data: Dataset) -> None:
    for name in ("zero_shot", "cot", "rubric", "joint"):
        assert all(audio_ids(c) == [] for c in prepare(data, name, "caption"))


def test_joint_sends_every_clip_in_one_call_with_a_label_schema(data: Dataset) -> None:
    (call,) = prepare(data, "joint")
    assert call.candidates == data.items[0].candidates  # fixed order by default
    assert audio_ids(call) == list(call.candidates)
    scores = call.schema["properties"]["scores"]  # type: ignore[index]
    assert scores["required"] == ["Clip 1", "Clip 2", "Clip 3", "Clip 4"]
    (ranked,) = prepare(data, "joint", answer="ranking")
    ranking = ranked.schema["properties"]["ranking"]  # type: ignore[index]
    assert ranking["items"]["enum"] == ["Clip 1", "Clip 2", "Clip 3", "Clip 4"]
    assert ranking["minItems"] == ranking["maxItems"] == 4


def test_joint_permuted_order_is_seeded_per_item_and_repeat(data: Dataset) -> None:
    orders = [prepare(data, "joint", repeat=r, order="permuted")[0].candidates for r in range(8)]
    again = [prepare(data, "joint", repeat=r, order="permuted")[0].candidates for r in range(8)]
    assert orders == again
    assert all(sorted(o) == sorted(data.items[0].candidates) for o in orders)
    assert len(set(orders)) > 1  # 8 repeats of 24 possible orders: not all the same
    for repeat, order in enumerate(orders):  # the audio follows the presentation order
        (call,) = prepare(data, "joint", repeat=repeat, order="permuted")
        assert audio_ids(call) == list(order)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"oder": "permuted"}, "unknown prompt_options \\['oder'\\]"),
        ({"order": "shuffled"}, "prompt_options.order"),
        ({"answer": "both"}, "prompt_options.answer"),
    ],
)
def test_bad_options_are_refused(data: Dataset, options: dict[str, Any], message: str) -> None:
    with pytest.raises(HarnessError, match=message):
        prepare(data, "joint", **options)


def test_summarize_is_not_a_scoring_variant() -> None:
    with pytest.raises(ValueError, match="summariser prompt"):
        get_variant("summarize")


def test_rubric_run_keeps_sub_scores_and_computes_the_score(
    tiny_dataset: Path, tmp_path: Path
) -> None:
    import asyncio
    import json

    from harness.calls.cache import ResponseCache
    from harness.config.experiment import ExperimentConfig
    from harness.core.records import read_records
    from harness.runs.runner import Runner

    answers = {
        "c0_0": json.dumps({"A": 8.0, "B": 9.0, "C": 7.0, "vocals": False}),
        "c0_1": json.dumps({"A": 8.0, "B": 9.0, "C": 7.0, "vocals": True}),
        "c0_2": json.dumps({"A": 2.0, "B": 9.0, "C": 9.0, "vocals": False}),
        "*": json.dumps({"A": 5.0, "B": 5.0, "C": 5.0, "vocals": False}),
    }
    config = ExperimentConfig(
        name="rubric",
        dataset=tiny_dataset,
        provider=provider_config(name="mock", answers=answers),
        prompt="rubric",
        n_bootstrap=20,
    )
    cache = ResponseCache(tmp_path / "cache")
    try:
        runner = Runner(config, cache=cache, results_dir=tmp_path / "r", show_progress=False)
        result = asyncio.run(runner.run())
    finally:
        cache.close()
    records = {r.candidates[0]: r for r in read_records(result.out_dir / "records.jsonl")}
    assert records["c0_0"].scores == {"c0_0": 8.2}
    assert records["c0_1"].scores == {"c0_1": 2.0}  # prominent vocals
    assert records["c0_2"].scores == {"c0_2": 3.0}  # A < 3.0
    assert records["c0_3"].scores == {"c0_3": 5.0}
    assert records["c0_1"].extra["rubric"] == {"A": 8.0, "B": 9.0, "C": 7.0, "vocals": True}
