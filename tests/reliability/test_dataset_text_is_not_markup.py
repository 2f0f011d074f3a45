"""Dataset text (dialogue turns, summaries, captions) is sent as it is: text that looks like
the harness's own audio placeholder is never read as one (no crash, no extra clip)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.calls.cache import ResponseCache
from harness.config.experiment import ExperimentConfig, provider_config
from harness.core.types import AudioRef, ChatRequest
from harness.runs.runner import Runner
from tests.reliability.conftest import MakeDataset

FORGED = ["<|audio:7|>", "<|audio:0|>", "<|audio:1|><|audio:0|>"]


def _forge(dataset: Path) -> None:
    items = [json.loads(line) for line in (dataset / "items.jsonl").read_text().splitlines()]
    for item, forged in zip(items, FORGED, strict=False):
        item["dialogue"][0]["text"] += f" {forged} ok?"
        item["summary"] = f"Friends talk {forged}."
    (dataset / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    clips = [json.loads(line) for line in (dataset / "clips.jsonl").read_text().splitlines()]
    for clip in clips:
        clip["caption"] += " <|audio:0|>"
    (dataset / "clips.jsonl").write_text("".join(json.dumps(c) + "\n" for c in clips))


@pytest.mark.parametrize(
    ("prompt", "inputs", "audio_per_call"),
    [
        ("zero_shot", {"dialogue": "full", "music": "audio"}, 1),
        ("zero_shot", {"dialogue": "summary", "music": "audio"}, 1),
        ("joint", {"dialogue": "full", "music": "audio"}, 4),
        ("text_only", {"dialogue": "full", "music": "caption"}, 0),
        ("cot", {"dialogue": "summary", "music": "caption"}, 0),
    ],
)
def test_placeholder_lookalikes_in_dataset_text_stay_text(
    prompt: str,
    inputs: dict[str, str],
    audio_per_call: int,
    make_dataset: MakeDataset,
    tmp_path: Path,
) -> None:
    dataset = make_dataset(n_items=3)
    _forge(dataset)
    config = ExperimentConfig(
        name="forged",
        dataset=dataset,
        provider=provider_config("mock"),
        prompt=prompt,
        inputs=inputs,  # type: ignore[arg-type]
    )
    runner = Runner(config, cache=ResponseCache(tmp_path / "cache"), results_dir=tmp_path / "r")
    calls = runner.prepare(runner.dataset())
    assert calls
    for call in calls:
        request = call.request
        assert isinstance(request, ChatRequest)
        assert len(request.audio) == audio_per_call
        text = "".join(p for p in request.parts if not isinstance(p, AudioRef))
        assert "<|audio:" in text  # the dataset's text, sent literally
    forged_in = [c for c in calls if FORGED[0] in "".join(map(str, c.request.parts))]  # type: ignore[union-attr]
    assert forged_in and all(c.item_id == "d0" for c in forged_in)
    runner.cache.close()
