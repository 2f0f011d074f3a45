from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile

from harness.dataset import load_dataset
from harness.errors import DatasetError


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
