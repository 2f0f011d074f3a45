from __future__ import annotations

import gc
import json
from pathlib import Path

import numpy as np
import pytest
import soundfile

from harness.core.dataset import gc_paused, load_dataset
from harness.core.errors import DatasetError, HarnessError
from harness.scoring.metrics import build_matrix


def _rewrite(path: Path, line_no: int, change: dict[str, object] | str) -> None:
    lines = path.read_text().splitlines()
    if isinstance(change, str):
        lines[line_no - 1] = change
    else:
        obj = json.loads(lines[line_no - 1])
        obj.update(change)
        lines[line_no - 1] = json.dumps(obj)
    path.write_text("\n".join(lines) + "\n")


def test_loads_items_clips_and_relevance(tiny_dataset: Path) -> None:
    data = load_dataset(tiny_dataset)
    assert [item.id for item in data.items] == ["d0", "d1", "d2"]
    assert len(data.clips) == 12
    item = data.items[0]
    assert item.relevance == {"c0_0": 3, "c0_1": 2, "c0_2": 1, "c0_3": 0}
    assert data.clips["c0_0"].path == tiny_dataset / "audio" / "c0_0.wav"
    assert data.n_candidates == 4


@pytest.mark.parametrize(
    ("file", "line", "change", "reason"),
    [
        (
            "items.jsonl",
            2,
            {"candidates": ["c1_0", "zzz"], "human_ranking": ["zzz", "c1_0"]},
            "unknown candidate id(s) ['zzz']",
        ),
        (
            "items.jsonl",
            2,
            {"human_ranking": ["c1_0", "c1_0", "c1_2", "c1_3"]},
            "not a permutation",
        ),
        ("items.jsonl", 3, {"id": "d0"}, "duplicate item id 'd0'"),
        ("items.jsonl", 1, {"dialogue": "hello"}, "dialogue"),
        (
            "items.jsonl",
            1,
            {"candidates": ["c0_0", "c0_0", "c0_1", "c0_2"]},
            "candidates contain duplicates",
        ),
        ("items.jsonl", 2, '{"id": "d1", ', "not valid JSON"),
        # issue 47 #15: the reason says where on the line, not "... at)"
        ("items.jsonl", 2, '{"id": "d\t1"}', "(Invalid control character at column 10)"),
        (
            "items.jsonl",
            1,
            '{"id": "d1",}',
            "(Expecting property name enclosed in double quotes at column 13)",
        ),
        ("items.jsonl", 1, "[1, 2]", "expected a JSON object"),
        ("clips.jsonl", 5, {"id": "c0_0"}, "duplicate clip id 'c0_0'"),
        ("clips.jsonl", 3, {"audio": "audio/nope.wav"}, "audio file not found: audio/nope.wav"),
        ("clips.jsonl", 4, {"caption": 12}, "caption"),
    ],
)
def test_errors_name_file_line_and_reason(
    tiny_dataset: Path, file: str, line: int, change: dict[str, object] | str, reason: str
) -> None:
    _rewrite(tiny_dataset / file, line, change)
    with pytest.raises(DatasetError) as info:
        load_dataset(tiny_dataset)
    assert info.value.path == tiny_dataset / file
    assert info.value.line == line
    assert reason in str(info.value)
    assert str(info.value).startswith(f"{tiny_dataset / file}:{line}: ")


def test_unreadable_audio(tiny_dataset: Path) -> None:
    (tiny_dataset / "audio" / "c0_2.wav").write_bytes(b"RIFF not really a wav")
    with pytest.raises(DatasetError, match=r"clips.jsonl:3: unreadable audio audio/c0_2.wav"):
        load_dataset(tiny_dataset)


@pytest.mark.parametrize("subtype", ["PCM_16", "FLOAT"])
def test_the_audio_header_decides_whatever_reads_it(tiny_dataset: Path, subtype: str) -> None:
    """Issue 26: a PCM WAV's header is read by `wave`, anything else (a float WAV) by
    libsndfile; an empty file of either kind has no samples."""
    import numpy as np
    import soundfile

    clip = tiny_dataset / "audio" / "c0_2.wav"
    soundfile.write(clip, np.zeros(800, dtype=np.float32), 16000, subtype=subtype)
    assert load_dataset(tiny_dataset).clips["c0_2"].path == clip.resolve()
    soundfile.write(clip, np.zeros(0, dtype=np.float32), 16000, subtype=subtype)
    with pytest.raises(DatasetError, match=r"clips.jsonl:3: audio file has no samples"):
        load_dataset(tiny_dataset)


def test_missing_folder_and_files(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="dataset folder not found"):
        load_dataset(tmp_path / "nope")
    with pytest.raises(DatasetError, match=r"clips.jsonl: file not found"):
        load_dataset(tmp_path)


def test_any_sample_rate_and_channel_count(tiny_dataset: Path) -> None:
    stereo = np.zeros((4410, 2), dtype=np.float32)
    soundfile.write(tiny_dataset / "audio" / "c0_1.wav", stereo, 44100)
    soundfile.write(tiny_dataset / "audio" / "c0_2.flac", stereo[:, 0], 22050)
    _rewrite(tiny_dataset / "clips.jsonl", 3, {"audio": "audio/c0_2.flac"})
    data = load_dataset(tiny_dataset)
    assert data.clips["c0_2"].path.suffix == ".flac"


# ------------------------------------------------------------------------ relevance forms
def _edit(path: Path, line_no: int, set_: dict[str, object], drop: tuple[str, ...] = ()) -> None:
    lines = path.read_text().splitlines()
    obj = {k: v for k, v in json.loads(lines[line_no - 1]).items() if k not in drop}
    lines[line_no - 1] = json.dumps({**obj, **set_})
    path.write_text("\n".join(lines) + "\n")


def test_binary_relevant_form(tiny_dataset: Path) -> None:
    _edit(tiny_dataset / "items.jsonl", 1, {"relevant": ["c0_2", "c0_0"]}, ("human_ranking",))
    _edit(tiny_dataset / "items.jsonl", 2, {"relevant": []}, ("human_ranking",))
    items = load_dataset(tiny_dataset).items
    assert items[0].relevance_form == "relevant"
    assert items[0].relevance == {"c0_3": 0, "c0_2": 1, "c0_1": 0, "c0_0": 1}
    assert list(items[0].gains) == [0.0, 1.0, 0.0, 1.0]  # candidates are listed c0_3 .. c0_0
    assert items[1].relevance_form == "relevant" and not items[1].gains.any()
    assert items[2].relevance_form == "human_ranking"


def test_graded_relevance_form_unlisted_candidates_are_zero(tiny_dataset: Path) -> None:
    _edit(
        tiny_dataset / "items.jsonl", 1, {"relevance": {"c0_1": 2.5, "c0_2": 1}}, ("human_ranking",)
    )
    item = load_dataset(tiny_dataset).items[0]
    assert item.relevance_form == "relevance"
    assert item.relevance == {"c0_3": 0.0, "c0_2": 1.0, "c0_1": 2.5, "c0_0": 0.0}
    assert list(item.gains) == [0.0, 1.0, 2.5, 0.0]


def test_item_without_relevance_loads_but_cannot_be_evaluated(tiny_dataset: Path) -> None:
    """Stage 3 and `harness annotate` work on items not ranked yet."""
    _edit(tiny_dataset / "items.jsonl", 2, {}, ("human_ranking",))
    data = load_dataset(tiny_dataset)
    assert data.items[1].relevance_form is None
    with pytest.raises(HarnessError, match=r"^item d1 has no relevance judgement"):
        build_matrix(data.items, {})


def test_a_run_or_evaluation_names_the_line_of_an_item_without_relevance(
    tiny_dataset: Path, tmp_path: Path
) -> None:
    """Issue 47 #16: one line naming items.jsonl and the item's line, before a run calls
    anything, and from `harness evaluate`."""
    from typer.testing import CliRunner

    from harness.cli.main import app
    from harness.core.errors import DatasetError
    from harness.runs.api import evaluate

    _edit(tiny_dataset / "items.jsonl", 2, {}, ("human_ranking",))
    expected = f"{tiny_dataset / 'items.jsonl'}:2: item d1 has no relevance judgement"
    experiment = tmp_path / "e.yaml"
    experiment.write_text(f"name: x\ndataset: {tiny_dataset}\nprovider: {{name: random}}\n")
    args = ["--results-dir", str(tmp_path / "r"), "--cache-dir", str(tmp_path / "c")]
    result = CliRunner().invoke(app, ["run", str(experiment), *args, "--no-progress"])
    assert result.exit_code == 2 and expected in " ".join(result.output.split())
    with pytest.raises(DatasetError) as refused:
        evaluate(tiny_dataset, {"d0": {"c0_0": 1.0}})
    assert str(refused.value).startswith(expected)


def test_query_context_audio_and_group_without_dialogue(tiny_dataset: Path) -> None:
    soundfile.write(tiny_dataset / "audio" / "played.wav", np.zeros(800), 16000)
    change = {"query": "songs like these", "context_audio": ["audio/played.wav"], "group": "pop"}
    _edit(tiny_dataset / "items.jsonl", 1, change, ("dialogue",))
    item = load_dataset(tiny_dataset).items[0]
    assert item.dialogue == () and item.query == "songs like these"
    assert item.context_audio == ("audio/played.wav",) and item.group == "pop"


def test_text_only_candidates(tiny_dataset: Path) -> None:
    _edit(tiny_dataset / "clips.jsonl", 1, {"title": "Clair de lune", "caption": ""}, ("audio",))
    clip = load_dataset(tiny_dataset).clips["c0_0"]
    assert not clip.has_audio and clip.title == "Clair de lune"
    with pytest.raises(HarnessError, match="clip c0_0 has no audio"):
        _ = clip.path


@pytest.mark.parametrize(
    ("line", "set_", "drop", "reason"),
    [
        (1, {"relevant": ["c0_0"]}, (), "one relevance form, not human_ranking and relevant"),
        (
            1,
            {"relevant": ["c0_0"], "relevance": {"c0_0": 1}},
            ("human_ranking",),
            "one relevance form, not relevant and relevance",
        ),
        (
            1,
            {"relevant": ["c0_0", "zz"]},
            ("human_ranking",),
            "relevant names id(s) not among the candidates: ['zz']",
        ),
        (
            1,
            {"relevance": {"zz": 1}},
            ("human_ranking",),
            "relevance names id(s) not among the candidates: ['zz']",
        ),
        (1, {"relevant": ["c0_1", "c0_1"]}, ("human_ranking",), "relevant contains duplicates"),
        (
            1,
            {"relevance": {"c0_1": -1}},
            ("human_ranking",),
            "relevance of 'c0_1' must be a finite number >= 0, not -1",
        ),
        (
            1,
            {"relevance": {"c0_1": float("nan")}},
            ("human_ranking",),
            "must be a finite number >= 0, not nan",
        ),
        (
            1,
            {"relevance": {"c0_1": float("inf")}},
            ("human_ranking",),
            "must be a finite number >= 0, not inf",
        ),
        (
            1,
            {"relevance": {"c0_1": True}},
            ("human_ranking",),
            "relevance.c0_1: Input should be a valid number",
        ),
        (
            1,
            {"relevance": {"c0_1": "2"}},
            ("human_ranking",),
            "relevance.c0_1: Input should be a valid number",
        ),
        (
            1,
            {"relevance": [1, 2]},
            ("human_ranking",),
            "relevance: Input should be a valid dictionary",
        ),
        (1, {"relevant": "c0_1"}, ("human_ranking",), "relevant: Input should be a valid"),
        (1, {"human_ranking": []}, (), "human_ranking [] is not a permutation"),
        (2, {}, ("dialogue",), "an item needs a dialogue, a query or context_audio"),
        (2, {"dialogue": []}, (), "an item needs a dialogue, a query or context_audio"),
        (2, {"query": ""}, ("dialogue",), "query: String should have at least 1 character"),
        (2, {"group": 3}, (), "group: Input should be a valid string"),
        (
            3,
            {"context_audio": ["audio/gone.wav"]},
            (),
            "context audio file not found: audio/gone.wav",
        ),
        (
            3,
            {"annotations": [["c2_0", "c2_1"]]},
            (),
            "annotations[0] ['c2_0', 'c2_1'] is not a permutation",
        ),
    ],
)
def test_malformed_relevance_and_inputs(
    tiny_dataset: Path, line: int, set_: dict[str, object], drop: tuple[str, ...], reason: str
) -> None:
    path = tiny_dataset / "items.jsonl"
    _edit(path, line, set_, drop)
    with pytest.raises(DatasetError) as info:
        load_dataset(tiny_dataset)
    message = str(info.value)
    assert message.startswith(f"{path}:{line}: ") and "\n" not in message
    assert reason in message


def test_unreadable_context_audio(tiny_dataset: Path) -> None:
    (tiny_dataset / "audio" / "bad.wav").write_bytes(b"RIFF not really a wav")
    _edit(tiny_dataset / "items.jsonl", 2, {"context_audio": ["audio/bad.wav"]})
    with pytest.raises(
        DatasetError, match=r"items.jsonl:2: unreadable context audio audio/bad.wav"
    ):
        load_dataset(tiny_dataset)
    assert load_dataset(tiny_dataset, check_audio=False).items[1].context_audio == (
        "audio/bad.wav",
    )


def test_clip_with_nothing_to_show(tiny_dataset: Path) -> None:
    _edit(tiny_dataset / "clips.jsonl", 2, {"caption": ""}, ("audio",))
    with pytest.raises(DatasetError) as info:
        load_dataset(tiny_dataset)
    assert (
        str(info.value)
        == f"{tiny_dataset / 'clips.jsonl'}:2: a clip needs audio, a caption or a title"
    )


def test_nested_pauses_leave_the_collector_as_they_found_it() -> None:
    assert gc.isenabled()
    with gc_paused():
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
