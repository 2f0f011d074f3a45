from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from harness.construct.stage1 import (
    MUSICCAPS_COLUMNS,
    Stage1Config,
    SuitabilityFilter,
    filter_clips,
    read_musiccaps,
    run_stage1,
)
from harness.core.errors import DatasetError


def write_musiccaps(path: Path, rows: list[tuple[str, list[str], str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(MUSICCAPS_COLUMNS)
        for ytid, aspects, caption in rows:
            writer.writerow([ytid, 30, 40, "/m/04rlf", repr(aspects), caption, 4, "False", "True"])
    return path


ROWS = [
    ("piano", ["solo piano", "calm", "no voices", "instrumental"], "A calm piano piece."),
    ("nosing", ["acoustic guitar", "no singer or backing vocals"], "Guitar.\nNo one sings."),
    ("free", ["ambient pad", "vocal-free", "without lyrics"], "Pads."),
    ("sings", ["pop", "female vocal", "instrumental"], "A woman sings over synths."),
    ("talk", ["lo-fi beat", "people talking"], "Beat with chatter."),
    ("hiss", ["jazz trio", "tape hiss"], "Old jazz recording."),
    ("crowd", ["live rock", "crowd cheering"], "A live concert."),
    ("scope", ["no drums and female vocals"], "Strings."),
    ("cheer", ["cheerful", "enchanting", "trap beat"], "A cheerful instrumental."),
]


@pytest.fixture
def musiccaps(tmp_path: Path) -> Path:
    return write_musiccaps(tmp_path / "musiccaps.csv", ROWS)


def test_reads_aspects_multiline_captions_and_flags(musiccaps: Path) -> None:
    rows = read_musiccaps(musiccaps)
    assert [r["id"] for r in rows] == [r[0] for r in ROWS]
    assert rows[1]["aspects"] == ["acoustic guitar", "no singer or backing vocals"]
    assert rows[1]["caption"] == "Guitar. No one sings."
    assert rows[0]["is_audioset_eval"] is True and rows[0]["is_balanced_subset"] is False


def test_negated_mentions_keep_instrumental_clips(musiccaps: Path) -> None:
    result = filter_clips(read_musiccaps(musiccaps), Stage1Config())
    kept = {r["id"] for r in result.kept}
    assert kept == {"piano", "nosing", "free", "cheer"}
    removed = {r["id"]: r["rules"] for r in result.removed}
    assert removed["sings"] == {"vocals": ["female vocal"]}
    assert removed["talk"] == {"speech": ["people talking"]}
    assert removed["hiss"] == {"noise": ["tape hiss"]}
    assert removed["crowd"] == {"sound_effects": ["crowd cheering"]}
    # "and" ends the scope of "no": the vocals are there.
    assert set(removed["scope"]) == {"vocals"}
    report = result.report
    assert report["n_input"] == 9 and report["n_kept"] == 4 and report["n_removed"] == 5
    assert report["removed_by_rule"] == {"vocals": 2, "speech": 1, "noise": 1, "sound_effects": 1}
    assert report["kept_thanks_to_negation"] == 3


def test_caption_check_is_optional(musiccaps: Path) -> None:
    rows = read_musiccaps(musiccaps)
    with_caption = filter_clips(rows, Stage1Config(check_caption=True))
    # "No one sings." is a negated sentence; the chatter is not named by any term.
    assert {r["id"] for r in with_caption.kept} == {"piano", "nosing", "free", "cheer"}
    shouting = [("x", ["drums"], "Drums. A man is rapping over the beat.")]
    assert not filter_clips(
        [{**rows[0], "id": "x", "aspects": shouting[0][1], "caption": shouting[0][2]}],
        Stage1Config(check_caption=True),
    ).kept


def test_term_lists_are_configurable() -> None:
    config = Stage1Config(rules={"brass": ["trumpet*"]}, negation_cues=["no"])
    rules = SuitabilityFilter(config)
    assert rules.fired(["muted trumpets"])[0] == {"brass": ["muted trumpets"]}
    assert rules.fired(["no trumpet"])[0] == {}
    assert rules.fired(["female vocal"])[0] == {}


@pytest.mark.parametrize(
    "phrase",
    ["no voices", "no singer", "there are no voices in this song", "non-vocal", "voice free"],
)
def test_negation_forms(phrase: str) -> None:
    fired, negated = SuitabilityFilter(Stage1Config()).fired([phrase])
    assert fired == {} and negated


def test_negation_window_is_bounded() -> None:
    rules = SuitabilityFilter(Stage1Config(negation_window=1))
    assert rules.fired(["no heavy distorted guitar or vocals"])[0] == {
        "vocals": ["no heavy distorted guitar or vocals"]
    }


def test_run_stage1_writes_outputs(musiccaps: Path, tmp_path: Path) -> None:
    report = run_stage1(musiccaps, tmp_path / "out")
    kept = [json.loads(line) for line in (tmp_path / "out/kept.jsonl").read_text().splitlines()]
    assert [k["id"] for k in kept] == ["piano", "nosing", "free", "cheer"]
    assert json.loads((tmp_path / "out/report.json").read_text())["n_kept"] == report["n_kept"]
    assert len((tmp_path / "out/removed.jsonl").read_text().splitlines()) == 5


def test_bad_rows_name_the_line(tmp_path: Path) -> None:
    path = write_musiccaps(tmp_path / "m.csv", [("a", ["x"], "c"), ("a", ["y"], "d")])
    with pytest.raises(DatasetError, match=r"m\.csv:3: duplicate ytid 'a'"):
        read_musiccaps(path)
    bad = tmp_path / "bad.csv"
    bad.write_text(",".join(MUSICCAPS_COLUMNS) + "\nb,0,10,,not a list,cap,1,False,False\n")
    with pytest.raises(DatasetError, match=r"bad\.csv:2"):
        read_musiccaps(bad)
    (tmp_path / "cols.csv").write_text("ytid,caption\na,b\n")
    with pytest.raises(DatasetError, match="missing column"):
        read_musiccaps(tmp_path / "cols.csv")
