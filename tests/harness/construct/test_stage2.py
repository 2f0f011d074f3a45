from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from harness.config.experiment import provider_config
from harness.construct.captions import caption_dialogues
from harness.construct.stage2 import (
    Stage2Config,
    count_words,
    detokenize,
    length_filter,
    read_dailydialog,
    run_stage2,
    seeded_sample,
)
from harness.core.errors import DatasetError, HarnessError
from harness.core.types import ProviderConfig

LONG = " __eou__ ".join(f"Turn number {i} says a few more words here ." for i in range(14))
TEXT = [
    "The kitchen stinks . __eou__ I'll throw out the garbage . __eou__",
    "So Dick , how about coffee ? __eou__ I don ’ t like it . __eou__ Come on , try a little . __eou__ "
    "What ’ s wrong with that ? __eou__ Not for me , Dick . __eou__",
    "So Dick , how about coffee ? __eou__ I don ’ t like it . __eou__ Come on , try a little . __eou__ "
    "What ’ s wrong with that ? __eou__ Not for me , Dick . __eou__",
    "Can we stop here ? __eou__ Yes . __eou__ It costs £ 565 . __eou__ OK , let's go . __eou__ Fine .",
    LONG + " __eou__",
    "",
]
EMOTION = ["2 0", "4 2 0 1 0", "4 2 0 1 0", "0 0 0 0", " ".join(["0"] * 14), ""]
ACT = ["3 4", "3 4 3 1 1", "3 4 3 1 1", "2 1 1 3", " ".join(["1"] * 14), ""]
TOPIC = ["1", "1", "1", "6", "2", ""]


def write_dailydialog(root: Path, *, topic: bool = True) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    files = {"text": TEXT, "emotion": EMOTION, "act": ACT}
    if topic:
        files["topic"] = TOPIC
    for name, lines in files.items():
        (root / f"dialogues_{name}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def test_detokenize_and_word_count() -> None:
    assert detokenize("I don ’ t know , Sam . It ’ s £ 5 ( cheap ) !") == (
        "I don’t know, Sam. It’s £5 (cheap)!"
    )
    assert count_words("I don’t know, Sam. It’s £5!") == 6


def test_reader_labels_duplicates_and_mismatch(tmp_path: Path) -> None:
    result = read_dailydialog(write_dailydialog(tmp_path / "dd"), Stage2Config())
    ids = [d["id"] for d in result.dialogues]
    assert ids == ["dd00001", "dd00002", "dd00004", "dd00005"]
    assert result.duplicates == 1 and result.empty_lines == 1
    first = result.dialogues[0]
    assert first["dialogue"] == [
        {"speaker": "A", "text": "The kitchen stinks."},
        {"speaker": "B", "text": "I'll throw out the garbage."},
    ]
    assert first["emotions"] == [2, 0] and first["acts"] == [3, 4] and first["topic"] == 1
    # Line 4 has five turns (the last lacks __eou__) but four labels: kept, labels dropped.
    assert result.mismatches == [{"line": 4, "turns": 5, "emotion": 4, "act": 4}]
    mismatched = result.dialogues[2]
    assert mismatched["emotions"] is None and mismatched["acts"] is None
    assert mismatched["topic"] == 6
    assert mismatched["dialogue"][2]["text"] == "It costs £565."


def test_split_naming_and_missing_labels(tmp_path: Path) -> None:
    root = tmp_path / "train"
    root.mkdir()
    (root / "dialogues_train.txt").write_text(TEXT[0] + "\n")
    (root / "dialogues_emotion_train.txt").write_text(EMOTION[0] + "\n")
    result = read_dailydialog(root, Stage2Config())
    assert result.dialogues[0]["emotions"] == [2, 0]
    assert "acts" not in result.dialogues[0] and "topic" not in result.dialogues[0]
    validation = tmp_path / "validation"
    validation.mkdir()
    (validation / "dialogues_validation.txt").write_text(TEXT[0] + "\n")
    (validation / "dialogues_act_validation.txt").write_text(ACT[0] + "\n")
    assert read_dailydialog(validation, Stage2Config()).dialogues[0]["acts"] == [3, 4]
    (validation / "dialogues_test.txt").write_text(TEXT[0] + "\n")
    with pytest.raises(DatasetError, match=r"one dialogues_<split>\.txt"):
        read_dailydialog(validation, Stage2Config())
    (root / "dialogues_act_train.txt").write_text("1\n2\n")
    with pytest.raises(DatasetError, match=r"2 lines but dialogues_train\.txt has 1"):
        read_dailydialog(root, Stage2Config())


def test_length_filter_and_sample(tmp_path: Path) -> None:
    config = Stage2Config(min_turns=3, max_turns=6, min_words=5, max_words=60)
    dialogues = read_dailydialog(write_dailydialog(tmp_path / "dd"), config).dialogues
    kept, removed = length_filter(dialogues, config)
    assert [d["id"] for d in kept] == ["dd00002", "dd00004"]
    assert removed == {
        "too_few_turns": 1,
        "too_many_turns": 1,
        "too_few_words": 0,
        "too_many_words": 0,
    }
    population = [{"id": str(i)} for i in range(50)]
    a = seeded_sample(population, 10, seed=3)
    assert a == seeded_sample(population, 10, seed=3)
    assert a != seeded_sample(population, 10, seed=4)
    assert [int(d["id"]) for d in a] == sorted(int(d["id"]) for d in a)


def test_bounds_are_checked() -> None:
    with pytest.raises(ValueError, match="max_turns"):
        Stage2Config(min_turns=5, max_turns=4)


CAPTION = "Two old friends catch up calmly over coffee, warm and nostalgic; gentle acoustic guitar at a slow tempo would suit them."


def mock(answers: object, **kwargs: object) -> ProviderConfig:
    return provider_config(name="mock", answers={"*": answers}, **kwargs)


def test_run_stage2_captions_through_the_cache(tmp_path: Path) -> None:
    source = write_dailydialog(tmp_path / "dd")
    answer = json.dumps({"summary": CAPTION})
    config = Stage2Config(min_turns=2, max_turns=6, min_words=1, provider=mock(answer))
    cache = tmp_path / "cache"
    report = run_stage2(source, tmp_path / "s2", config, cache_dir=cache)
    lines = (tmp_path / "s2/dialogues.jsonl").read_text().splitlines()
    dialogues = [json.loads(line) for line in lines]
    assert [d["id"] for d in dialogues] == ["dd00001", "dd00002", "dd00004"]
    assert {d["summary"] for d in dialogues} == {CAPTION}
    assert report["captions"]["model_calls"] == 3 and report["captions"]["failed"] == 0
    assert report["label_mismatches"][0]["line"] == 4
    assert report["stats_selected"]["count"] == 3
    again = run_stage2(source, tmp_path / "s2b", config, cache_dir=cache)
    assert again["captions"]["model_calls"] == 0 and again["captions"]["cached"] == 3
    assert (tmp_path / "s2b/dialogues.jsonl").read_bytes() == (
        tmp_path / "s2/dialogues.jsonl"
    ).read_bytes()


def test_captions_share_the_summariser_cache(tmp_path: Path) -> None:
    """A dialogue captioned in stage 2 is not summarised again by an experiment."""
    from harness.calls.cache import ResponseCache
    from harness.config.experiment import ExperimentConfig
    from harness.core.dataset import Item
    from harness.protocols.summaries import summarize
    from harness.runs.runner import Runner

    dialogue = {
        "id": "dd1",
        "dialogue": [{"speaker": "A", "text": "Coffee?"}, {"speaker": "B", "text": "Sure."}],
    }
    provider = mock(json.dumps({"summary": CAPTION}))
    outcome = caption_dialogues([dialogue], provider, cache_dir=tmp_path / "c")
    assert outcome.captions == {"dd1": CAPTION} and outcome.model_calls == 1
    item = Item.model_validate({**dialogue, "id": "d0001", "candidates": ["x", "y"]})
    cache = ResponseCache(tmp_path / "c")
    runner = Runner(
        ExperimentConfig(name="e", dataset=tmp_path, provider=provider),
        cache=cache,
        show_progress=False,
    )
    line = asyncio.run(summarize(runner.answerer, item))
    cache.close()
    assert line.summary == CAPTION and line.cache_hit and runner.stats.model_calls == 0


def test_caption_failures_are_reported_not_invented(tmp_path: Path) -> None:
    dialogues: list[dict[str, Any]] = [
        {"id": "x", "dialogue": [{"speaker": "A", "text": "Hi."}]},
    ]
    outcome = caption_dialogues(
        dialogues, mock("!permanent", max_attempts=1), cache_dir=tmp_path / "c"
    )
    assert outcome.captions == {} and "permanent" in outcome.errors["x"]
    short = mock('{"summary": "Too short."}', reask=0)
    outcome = caption_dialogues(dialogues, short, cache_dir=tmp_path / "s")
    assert outcome.captions == {} and "summary_length" in outcome.errors["x"]
    unusable = mock(['{"score": 1}', json.dumps({"summary": CAPTION})], reask=1)
    outcome = caption_dialogues(dialogues, unusable, cache_dir=tmp_path / "d")
    assert outcome.captions == {"x": CAPTION} and outcome.model_calls == 2
    assert outcome.summary()["failed"] == 0


def test_captioning_needs_a_judge(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="not a chat model"):
        caption_dialogues([], provider_config(name="random"), cache_dir=tmp_path / "c")


def test_run_stage2_without_provider_leaves_summaries_empty(tmp_path: Path) -> None:
    source = write_dailydialog(tmp_path / "dd")
    with pytest.raises(HarnessError, match="no dialogue passes the filters"):
        run_stage2(source, tmp_path / "s2", Stage2Config(min_words=100))
    report = run_stage2(source, tmp_path / "s2", Stage2Config(min_words=1))
    assert report["captions"] is None
    first = json.loads((tmp_path / "s2/dialogues.jsonl").read_text().splitlines()[0])
    assert first["summary"] is None
