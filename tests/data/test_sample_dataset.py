"""Checks on the sample dataset in data/sample (plain json + soundfile, no harness import)."""

from __future__ import annotations

import importlib.util
import io
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample"


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            row = json.loads(line)
            assert isinstance(row, dict), f"{path.name}:{line_no} is not an object"
            rows.append(row)
    return rows


@pytest.fixture(scope="module")
def items() -> list[dict[str, Any]]:
    return _read_jsonl(SAMPLE / "items.jsonl")


@pytest.fixture(scope="module")
def clips() -> list[dict[str, Any]]:
    return _read_jsonl(SAMPLE / "clips.jsonl")


def _load_build_audio() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sample_build_audio", SAMPLE / "build_audio.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sizes(items: list[dict[str, Any]], clips: list[dict[str, Any]]) -> None:
    assert len(items) >= 24
    assert len(clips) >= 40


def test_ids_unique(items: list[dict[str, Any]], clips: list[dict[str, Any]]) -> None:
    item_ids = [i["id"] for i in items]
    clip_ids = [c["id"] for c in clips]
    assert len(item_ids) == len(set(item_ids))
    assert len(clip_ids) == len(set(clip_ids))


def test_items_are_well_formed(items: list[dict[str, Any]], clips: list[dict[str, Any]]) -> None:
    clip_ids = {c["id"] for c in clips}
    for item in items:
        iid = item["id"]
        cands = item["candidates"]
        assert len(cands) == 4, iid
        assert len(set(cands)) == 4, iid
        assert set(cands) <= clip_ids, f"{iid}: unknown candidate {set(cands) - clip_ids}"
        ranking = item["human_ranking"]
        assert sorted(ranking) == sorted(cands), f"{iid}: ranking is not a permutation"
        assert isinstance(item["summary"], str) and item["summary"].strip(), iid
        turns = item["dialogue"]
        assert 4 <= len(turns) <= 10, iid
        for turn in turns:
            assert turn["speaker"] in {"A", "B"}, iid
            assert isinstance(turn["text"], str) and turn["text"].strip(), iid


def test_clips_are_well_formed(clips: list[dict[str, Any]]) -> None:
    for clip in clips:
        cid = clip["id"]
        assert isinstance(clip["caption"], str) and clip["caption"].strip(), cid
        assert 3 <= len(clip["aspects"]) <= 6, cid
        assert clip["audio"] == f"audio/{cid}.wav", cid
        source = clip["source"]
        for key in ("package", "version", "track", "start_s", "duration_s", "license"):
            assert key in source, f"{cid}: source.{key} missing"
        assert source["duration_s"] == 10.0, cid
        assert source["start_s"] >= 0.0, cid


def test_every_clip_is_a_candidate(
    items: list[dict[str, Any]], clips: list[dict[str, Any]]
) -> None:
    used = {c for item in items for c in item["candidates"]}
    assert {c["id"] for c in clips} <= used


def test_cut_clip_is_10s_mono_24k_and_deterministic(clips: list[dict[str, Any]]) -> None:
    pytest.importorskip("immich_memories_music")
    sf = pytest.importorskip("soundfile")
    build_audio = _load_build_audio()
    clip = clips[0]
    first = build_audio.render_clip(clip)
    build_audio.decode.cache_clear()  # decode again from the file, not from the cache
    second = build_audio.render_clip(clip)
    assert first == second

    data, sr = sf.read(io.BytesIO(first), dtype="int16", always_2d=True)
    assert sr == 24_000
    assert data.shape == (240_000, 1)
    info = sf.info(io.BytesIO(first))
    assert info.subtype == "PCM_16"
    assert info.duration == pytest.approx(10.0)

    signal = build_audio.cut_clip(
        build_audio.track_path(clip["source"]["track"]),
        clip["source"]["start_s"],
        clip["source"]["duration_s"],
    )
    assert signal.ndim == 1 and signal.shape[0] == 240_000
    assert abs(signal[0]) < 1e-3 and abs(signal[-1]) < 1e-3  # faded in and out
    assert float(abs(signal).max()) > 0.05  # not silent
