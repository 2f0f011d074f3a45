"""Hugging Face sources read as untrusted (issue 48): columns of the wrong type, audio without
a usable sampling rate, a damaged materialised source.json, a Parquet folder of two tables and
`hf://../..` are one line naming the source (and the row), never a traceback; an audio cell that
names a file outside the source's folder (an absolute or `../` path) is refused, not copied
into the dataset and sent to the judge."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.config.sources import HFSource, folder_for, parse_hub_id
from harness.core.errors import HarnessError
from harness.interop.hf import SOURCE_FILE, materialize, read_source

datasets = pytest.importorskip("datasets")
pytestmark = pytest.mark.usefixtures("offline_hub")

ITEMS = {"id": ["a", "b"], "query": ["rain", "sun"], "candidates": [["x", "y"], ["y", "x"]]}


@pytest.fixture
def offline_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")
    monkeypatch.setenv("BGM_JUDGE_DATA", str(tmp_path / "data"))


def _items(tmp_path: Path, **changed: Any) -> HFSource:
    path = tmp_path / "items.parquet"
    datasets.Dataset.from_dict({**ITEMS, **changed}).to_parquet(str(path))
    return HFSource.model_validate({"uri": str(path)})


def _with_clips(tmp_path: Path, clips: dict[str, Any], features: Any = None) -> HFSource:
    table = datasets.DatasetDict(
        {
            "items": datasets.Dataset.from_dict(ITEMS),
            "clips": datasets.Dataset.from_dict(clips, features=features),
        }
    )
    table.save_to_disk(str(tmp_path / "saved"))
    columns = {"items": {"split": "items"}, "clips": {"split": "clips"}}
    return HFSource.model_validate({"uri": str(tmp_path / "saved"), "columns": columns})


def _one_line(source: HFSource, *words: str) -> str:
    with pytest.raises(HarnessError) as refused:
        materialize(source)
    text = str(refused.value)
    assert "\n" not in text and text.strip(), text
    for word in words:
        assert word in text, text
    return text


@pytest.mark.parametrize(
    ("column", "value", "row"),
    [
        ("dialogue", [["hi", "there"], ["yo"]], "row 0"),
        ("dialogue", [5, 6], "row 0"),
        ("candidates", [5, 6], "row 0"),
        ("dialogue", [[{"speaker": "A"}], [{"speaker": "B"}]], "row 0"),
        ("relevance", [["x"], ["y"]], "row 0"),
    ],
)
def test_a_column_of_the_wrong_type_names_the_row(
    tmp_path: Path, column: str, value: Any, row: str
) -> None:
    _one_line(_items(tmp_path, **{column: value}), "items.parquet", row, column)


@pytest.mark.parametrize("rate", [None, 0, -5])
def test_audio_arrays_without_a_usable_sampling_rate_name_the_row(
    tmp_path: Path, rate: int | None
) -> None:
    cell = {"array": np.zeros(160, dtype=np.float32).tolist(), "sampling_rate": rate}
    source = _with_clips(tmp_path, {"id": ["x", "y"], "audio": [cell, cell]})
    _one_line(source, "clips row 0", "audio")


@pytest.mark.parametrize("where", ["absolute", "parent"])
def test_an_audio_cell_naming_a_file_outside_the_source_is_refused(
    tmp_path: Path, where: str
) -> None:
    import soundfile

    secret = tmp_path / "elsewhere" / "private.wav"
    secret.parent.mkdir()
    soundfile.write(secret, np.zeros(1600, dtype=np.float32), 16000)
    path = str(secret) if where == "absolute" else "../elsewhere/private.wav"
    source = _with_clips(tmp_path, {"id": ["x", "y"], "audio": [{"bytes": None, "path": path}] * 2})
    text = _one_line(source, "clips row 0", "audio path")
    assert "outside the source's folder" in text or "leaves the folder" in text
    audio = folder_for(source) / "audio"
    assert not audio.exists() or not any(audio.iterdir())


@pytest.mark.parametrize(
    "damage",
    [b"", b'{"uri": "x"', b"[" * 100_000 + b"]" * 100_000, b"\xff\xfe", b"[1]", b"1e999999"],
)
def test_a_damaged_source_json_is_written_again(tmp_path: Path, damage: bytes) -> None:
    source = _items(tmp_path)
    folder = materialize(source)
    (folder / SOURCE_FILE).write_bytes(damage)  # a kill during its write, a damaged disk
    assert read_source(folder) is None
    assert materialize(source) == folder
    assert read_source(folder) is not None


def test_a_parquet_folder_of_two_tables_is_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "two"
    folder.mkdir()
    datasets.Dataset.from_dict(ITEMS).to_parquet(str(folder / "items.parquet"))
    datasets.Dataset.from_dict({"clip": ["x"], "n": [1]}).to_parquet(str(folder / "more.parquet"))
    _one_line(HFSource.model_validate({"uri": str(folder)}), str(folder))


@pytest.mark.parametrize("uri", ["hf://../..", "hf://./x", "hf://a/..", "hf://.a/b", "hf://a--b/c"])
def test_a_hub_id_that_is_a_path_is_refused(uri: str) -> None:
    with pytest.raises(HarnessError, match="a Hub dataset is hf://OWNER/NAME"):
        parse_hub_id(uri)


def test_a_table_of_more_rows_than_the_bound_is_one_line_not_minutes_of_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (scaled down: a 0.6 MB Parquet file of 20 million repeated rows ran past 90 s)
    from harness.core import files

    monkeypatch.setattr(files, "MAX_TABLE_ROWS", 1)
    text = _one_line(_items(tmp_path), "items.parquet", "more than 1 rows")
    assert not (folder_for(_items(tmp_path)) / "items.jsonl").exists(), text
