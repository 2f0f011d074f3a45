"""`harness import musicrs`: a small file written here, and the real release when present.

The real data is not part of the project: it is looked for in $BGM_JUDGE_REALDATA, else in
`../shared/realdata` beside the repository, and its test skips when neither has it.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile
from typer.testing import CliRunner

from harness.cli.main import app
from harness.core.dataset import load_dataset
from harness.core.errors import DatasetError
from harness.interop.musicrs import clip_id, import_musicrs, normalise_title

REPO = Path(__file__).resolve().parents[3]
REALDATA = Path(os.environ.get("BGM_JUDGE_REALDATA", REPO.parent / "shared" / "realdata"))
RELEASE = REALDATA / "musicrs" / "musicrs_100_candidates.jsonl"


def thread(name: str, candidates: list[str], gold: list[str], **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "query": f"What should I play after {name}?",
        "combined_text": f"Thread {name}: recommend me something.",
        "source_subreddit": extra.pop("subreddit", "jazz"),
        "final_candidates": candidates,
        "limited_gt": gold,
        "valid_urls": ["https://youtu.be/x"],
        **extra,
    }


def write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_normalisation_follows_musicrs() -> None:
    assert normalise_title("  \u201cSo What\u201d ") == "so what"
    assert normalise_title("Don\u2019t Stop") == "don't stop"
    assert normalise_title('"eternal triangle"') == normalise_title("Eternal Triangle")


def test_one_item_per_thread_with_shared_title_ids(tmp_path: Path) -> None:
    source = write(
        tmp_path / "src.jsonl",
        [
            thread("t3_a", ["So What", "Blue in Green", "Naima"], ["\u201cNaima\u201d"]),
            thread("t3_b", ["Naima", "Giant Steps"], [], subreddit="metal", url="https://r/x"),
        ],
    )
    summary = import_musicrs(source, tmp_path / "out")
    data = load_dataset(tmp_path / "out")
    first, second = data.items
    assert (first.id, first.group, first.query) == (
        "t3_a",
        "jazz",
        "What should I play after t3_a?",
    )
    assert first.dialogue[0].text == "Thread t3_a: recommend me something."
    assert first.relevant == (clip_id("Naima"),) and second.relevant == ()
    assert first.candidates[2] == second.candidates[0] == clip_id("Naima")  # one clip
    assert (
        data.clips[clip_id("Naima")].text == "Naima" and not data.clips[clip_id("Naima")].has_audio
    )
    assert second.url == "https://r/x"
    assert (summary.n_items, summary.n_clips, summary.n_candidates) == (2, 4, 5)
    assert (summary.n_relevant, summary.n_items_without_relevant) == (1, 1)
    assert "CC BY 4.0" in (tmp_path / "out" / "README.md").read_text()


def test_two_spellings_stay_two_candidates(tmp_path: Path) -> None:
    source = write(
        tmp_path / "src.jsonl",
        [
            thread(
                "t3_a", ["Eternal Triangle", '"eternal triangle"', "Moanin'"], ["Eternal Triangle"]
            )
        ],
    )
    import_musicrs(source, tmp_path / "out")
    (item,) = load_dataset(tmp_path / "out").items
    assert len(item.candidates) == 3
    # MusiCRS matches gold by normalised title, so both spellings count as relevant.
    assert set(item.relevant or ()) == {clip_id("Eternal Triangle"), clip_id('"eternal triangle"')}


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([thread("t3_a", ["A", "B"], ["C"])], "src.jsonl:1: limited_gt title 'C' is not among"),
        (
            [thread("t3_a", ["A", "B"], []), thread("t3_a", ["A", "B"], [])],
            "src.jsonl:2: second thread",
        ),
        ([{"name": "t3_a", "query": "q"}], "src.jsonl:1: source_subreddit: Field required"),
        ([thread("t3_a", ["A"], [])], "src.jsonl:1: final_candidates: List should have at least 2"),
    ],
)
def test_bad_lines_name_the_file_and_line(
    tmp_path: Path, rows: list[dict[str, Any]], message: str
) -> None:
    with pytest.raises(DatasetError, match=message):
        import_musicrs(write(tmp_path / "src.jsonl", rows), tmp_path / "out")


def test_context_audio_from_a_folder_per_thread(tmp_path: Path) -> None:
    source = write(
        tmp_path / "src.jsonl",
        [thread("t3_a", ["A", "B"], ["A"]), thread("t3_b", ["A", "C"], ["C"])],
    )
    audio = tmp_path / "audio"
    (audio / "t3_a").mkdir(parents=True)
    for name in ("2.wav", "1.wav", "notes.txt"):
        soundfile.write(audio / "t3_a" / "1.wav", np.zeros(800), 8000)
        (audio / "t3_a" / name).write_bytes((audio / "t3_a" / "1.wav").read_bytes())
    summary = import_musicrs(source, tmp_path / "out", audio=audio)
    first, second = load_dataset(tmp_path / "out").items
    assert first.context_audio == ("context_audio/t3_a/1.wav", "context_audio/t3_a/2.wav")
    assert second.context_audio is None and summary.n_items_with_audio == 1
    import_musicrs(source, tmp_path / "only", audio=audio, only_with_audio=True)
    assert [i.id for i in load_dataset(tmp_path / "only").items] == ["t3_a"]


def test_cli_prints_counts_and_refuses_bad_input_in_one_line(tmp_path: Path) -> None:
    source = write(tmp_path / "src.jsonl", [thread("t3_a", ["A", "B"], ["B"])])
    runner = CliRunner()
    done = runner.invoke(app, ["import", "musicrs", str(source), "--out", str(tmp_path / "out")])
    assert done.exit_code == 0, done.output
    assert "1 items, 2 clips, 2 candidates, 1 gold" in done.output
    write(source, [thread("t3_a", ["A", "B"], ["Z"])])
    bad = runner.invoke(app, ["import", "musicrs", str(source), "--out", str(tmp_path / "o2")])
    assert bad.exit_code == 2 and "src.jsonl:1: limited_gt title 'Z'" in bad.output
    assert "Traceback" not in bad.output


@pytest.mark.skipif(not RELEASE.is_file(), reason=f"MusiCRS release not found at {RELEASE}")
def test_the_real_release_imports(tmp_path: Path) -> None:
    summary = import_musicrs(RELEASE, tmp_path / "musicrs")
    data = load_dataset(tmp_path / "musicrs")
    assert summary.n_items == len(data.items) == 477
    assert summary.n_candidates == sum(len(i.candidates) for i in data.items) == 46_466
    assert summary.n_relevant == 3_829 and summary.n_items_without_relevant == 5
    assert summary.n_clips == len(data.clips) == 6_351 and summary.n_duplicate_candidates == 0
    sizes = Counter(len(i.candidates) for i in data.items)
    assert (sizes[100], sizes[55], sizes[90]) == (302, 7, 5) and min(sizes) == 55
    assert max(len(i.relevant or ()) for i in data.items) == 10
    assert dict(summary.groups) == {
        "classicalmusic": 123,
        "hiphopheads": 100,
        "electronicmusic": 56,
        "metal": 49,
        "popheads": 45,
        "indieheads": 43,
        "jazz": 36,
        "postrock": 18,
        "ambientmusic": 7,
    }
    # Every gold title is a candidate under MusiCRS's normalisation, and only gold is relevant.
    rows = [json.loads(line) for line in RELEASE.open(encoding="utf-8")]
    for row, item in zip(rows, data.items, strict=True):
        titles = {cid: data.clips[cid].text for cid in item.candidates}
        gold = {normalise_title(g) for g in row["limited_gt"]}
        assert {normalise_title(titles[c]) for c in item.relevant or ()} == gold
        assert sum(normalise_title(t) in gold for t in titles.values()) == len(item.relevant or ())


def test_the_release_as_a_hugging_face_dataset_imports_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    datasets = pytest.importorskip("datasets")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    rows = [
        thread("t3_a", ["So What", "Blue in Green", "Naima"], ["\u201cNaima\u201d"]),
        thread("t3_b", ["Naima", "Giant Steps"], [], subreddit="metal"),
    ]
    source = write(tmp_path / "src.jsonl", rows)
    datasets.DatasetDict({"train": datasets.Dataset.from_list(rows)}).save_to_disk(
        str(tmp_path / "saved")
    )
    import_musicrs(source, tmp_path / "from-jsonl")
    result = CliRunner().invoke(
        app, ["import", "musicrs", str(tmp_path / "saved"), "--out", str(tmp_path / "from-hf")]
    )
    assert result.exit_code == 0, result.output
    for name in ("items.jsonl", "clips.jsonl"):
        assert (tmp_path / "from-hf" / name).read_text() == (
            tmp_path / "from-jsonl" / name
        ).read_text()
    assert "from `saved`" in (tmp_path / "from-hf" / "README.md").read_text()
    bad = CliRunner().invoke(
        app, ["import", "musicrs", str(tmp_path / "saved"), "--split", "test", "--out", "x"]
    )
    assert bad.exit_code == 2 and "no split 'test' (splits: train)" in bad.output
