from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.construct.stage3 import Stage3Config, pick_candidates, pool_size, run_stage3
from harness.core.dataset import load_dataset
from harness.core.errors import HarnessError

Inputs = tuple[Path, Path, Path]


def tree_bytes(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


@pytest.mark.parametrize(
    ("n", "fraction", "expected"), [(10, 0.1, 4), (100, 0.1, 10), (20, 0.1, 4), (95, 0.1, 10)]
)
def test_pool_size(n: int, fraction: float, expected: int) -> None:
    assert pool_size(n, Stage3Config(top_fraction=fraction)) == expected


def test_one_plus_three_rule() -> None:
    ranked = [f"c{i:03d}" for i in range(200)]
    config = Stage3Config(shuffle_candidates=False)
    picks = {
        seed: pick_candidates("d1", ranked, 20, config.model_copy(update={"seed": seed}))
        for seed in range(5)
    }
    for chosen in picks.values():
        assert chosen[0] == "c000" and len(set(chosen)) == 4
        assert all(c in ranked[1:20] for c in chosen[1:])
    assert picks[0] == pick_candidates("d1", ranked, 20, config)
    assert len({tuple(p) for p in picks.values()}) > 1
    shuffled = pick_candidates("d1", ranked, 20, Stage3Config())
    assert sorted(shuffled) == sorted(picks[0])


def test_stage3_writes_a_valid_dataset(stage3_inputs: Inputs, tmp_path: Path) -> None:
    clips, dialogues, audio = stage3_inputs
    report = run_stage3(clips, dialogues, audio, tmp_path / "ds")
    assert report["n_clips_eligible"] == 10
    assert report["clips_excluded"] == {"missing": 1, "unreadable": 1, "empty": 0}
    assert report["pool_size"] == 4
    dataset = load_dataset(tmp_path / "ds")
    assert [i.id for i in dataset.items] == ["dd00001", "dd00002", "dd00003"]
    expected_top1 = {"dd00001": "piano", "dd00002": "disco", "dd00003": "strings"}
    for item in dataset.items:
        assert len(item.candidates) == 4 and item.human_ranking is None
        assert not {"nofile", "broken"} & set(item.candidates)
        top1 = item.model_extra["retrieval"]["top1"]  # type: ignore[index]
        assert top1 == expected_top1[item.id] and top1 in item.candidates
        assert item.summary
    used = {c for item in dataset.items for c in item.candidates}
    assert set(dataset.clips) == used
    assert (tmp_path / "ds/audio/piano.wav").read_bytes() == (audio / "piano.wav").read_bytes()


def test_same_seed_same_bytes(stage3_inputs: Inputs, tmp_path: Path) -> None:
    clips, dialogues, audio = stage3_inputs
    config = Stage3Config(top_fraction=0.5)  # a pool of 5: the draw matters
    run_stage3(clips, dialogues, audio, tmp_path / "a", config)
    run_stage3(clips, dialogues, audio, tmp_path / "b", config)
    assert tree_bytes(tmp_path / "a") == tree_bytes(tmp_path / "b")
    reseeded = []
    for seed in (1, 2, 3):
        run_stage3(
            clips, dialogues, audio, tmp_path / f"s{seed}", config.model_copy(update={"seed": seed})
        )
        reseeded.append((tmp_path / f"s{seed}/items.jsonl").read_bytes())
    assert any(items != (tmp_path / "a/items.jsonl").read_bytes() for items in reseeded)


def test_query_dialogue_needs_no_captions(stage3_inputs: Inputs, tmp_path: Path) -> None:
    clips, dialogues, audio = stage3_inputs
    rows = [json.loads(line) for line in dialogues.read_text().splitlines()]
    (tmp_path / "bare.jsonl").write_text(
        "".join(json.dumps({**r, "summary": None}) + "\n" for r in rows)
    )
    with pytest.raises(HarnessError, match="no caption"):
        run_stage3(clips, tmp_path / "bare.jsonl", audio, tmp_path / "x")
    run_stage3(
        clips, tmp_path / "bare.jsonl", audio, tmp_path / "y", Stage3Config(query="dialogue")
    )
    assert all(item.summary is None for item in load_dataset(tmp_path / "y").items)


def test_refuses_to_clobber_and_needs_enough_audio(stage3_inputs: Inputs, tmp_path: Path) -> None:
    clips, dialogues, audio = stage3_inputs
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy/notes.txt").write_text("mine")
    with pytest.raises(HarnessError, match="not empty"):
        run_stage3(clips, dialogues, audio, tmp_path / "busy", overwrite=True)
    run_stage3(clips, dialogues, audio, tmp_path / "ds")
    with pytest.raises(HarnessError, match="--overwrite"):
        run_stage3(clips, dialogues, audio, tmp_path / "ds")
    run_stage3(clips, dialogues, audio, tmp_path / "ds", overwrite=True)
    with pytest.raises(HarnessError, match="only 10 clip"):
        run_stage3(clips, dialogues, audio, tmp_path / "z", Stage3Config(n_candidates=11))


def test_clips_without_a_caption_are_captioned_from_their_tags(
    stage3_inputs: Inputs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clips, dialogues, audio = stage3_inputs
    rows = [json.loads(line) for line in clips.read_text().splitlines()]
    for row in rows:
        if row["id"] in ("jazz", "nofile"):
            del row["caption"]
    clips.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tagged: list[list[str]] = []

    def fake(paths: dict[str, Path]) -> dict[str, str]:
        tagged.append(sorted(paths))
        return {k: "jazz, slow, piano, quiet, no vocals; jazz, chillout, mellow" for k in paths}

    monkeypatch.setattr("harness.construct.stage3.captions_from_tags", fake)
    report = run_stage3(clips, dialogues, audio, tmp_path / "ds")
    assert tagged == [["jazz"]]  # nofile has no audio: not eligible, not tagged
    assert report["n_captions_from_tags"] == 1
    refused = Stage3Config(captions_from_tags=False)
    with pytest.raises(HarnessError, match=r"1 clip\(s\) have no caption \(first: jazz\)"):
        run_stage3(clips, dialogues, audio, tmp_path / "ds2", refused)
