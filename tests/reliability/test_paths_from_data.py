"""Paths that come from data stay inside their folder (issue 27, class 2): a clip's audio, an
item's context audio, a thread's name in an importer's input. One check (`harness.core.paths`) is
used wherever such a path is opened, served or written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from harness.cli.main import app
from harness.construct.annotate.export import export_annotations
from harness.construct.annotate.store import RankingStore
from harness.construct.stage4 import run_stage4
from harness.core.dataset import load_dataset
from harness.core.errors import DatasetError, HarnessError
from harness.core.paths import UnsafePath, contained, inside
from harness.interop.musicrs import import_musicrs
from tests.conftest import write_tiny_dataset

ESCAPES = ["../outside.txt", "/etc/passwd", "audio/../../outside.txt", "..\\outside.txt", "C:x"]


def _set_audio(dataset: Path, audio: str) -> None:
    lines = [json.loads(x) for x in (dataset / "clips.jsonl").read_text().splitlines()]
    lines[0]["audio"] = audio
    (dataset / "clips.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


@pytest.mark.parametrize("audio", ESCAPES)
def test_d14_a_clip_path_leaving_the_dataset_folder_is_refused_with_its_line(
    audio: str, tmp_path: Path
) -> None:
    """D14: `harness view` served `/audio/...` from `../outside.txt` or `/etc/passwd`, and
    `--embed-audio` embedded it: the dataset's loader refuses such a path (both read it)."""
    (tmp_path / "outside.txt").write_text("root:x:0:0")
    dataset = write_tiny_dataset(tmp_path / "dataset", n_items=1)
    _set_audio(dataset, audio)
    for check_audio in (True, False):  # `harness report` and `view` load without checking
        with pytest.raises(DatasetError, match=r"clips\.jsonl:1: .*audio path"):
            load_dataset(dataset, check_audio=check_audio)


def test_d14_context_audio_leaving_the_dataset_folder_is_refused(tmp_path: Path) -> None:
    dataset = write_tiny_dataset(tmp_path / "dataset", n_items=1)
    items = [json.loads(x) for x in (dataset / "items.jsonl").read_text().splitlines()]
    items[0]["context_audio"] = ["../../etc/passwd"]
    (dataset / "items.jsonl").write_text("".join(json.dumps(x) + "\n" for x in items))
    with pytest.raises(DatasetError, match=r"items\.jsonl:1: .*leaves the folder"):
        load_dataset(dataset, check_audio=False)


@pytest.mark.slow
def test_d14_report_embed_audio_never_embeds_a_file_outside_the_dataset(
    tmp_path: Path,
) -> None:
    from harness.fake_api import FakeServer
    from tests.reliability.conftest import fast_settings, write_dataset, write_experiment

    dataset = write_dataset(tmp_path / "data", 2)
    with FakeServer(fast_settings()) as server:
        experiment = write_experiment(tmp_path / "exp.yaml", dataset, server)
        done = CliRunner().invoke(
            app,
            ["run", str(experiment), "--results-dir", str(tmp_path / "results"),
             "--cache-dir", str(tmp_path / "cache"), "--no-progress"],
        )  # fmt: skip
    assert done.exit_code == 0, done.output
    (tmp_path / "outside.txt").write_text("root:x:0:0:SECRET")
    _set_audio(dataset, "../outside.txt")
    report = CliRunner().invoke(
        app,
        ["report", str(tmp_path / "results" / "soak"), "--out", str(tmp_path / "r"),
         "--embed-audio"],
    )  # fmt: skip
    assert report.exit_code == 2 and "Traceback" not in report.output
    assert "leaves the folder" in report.stderr
    for written in (tmp_path / "r").rglob("*") if (tmp_path / "r").exists() else []:
        if written.is_file():
            assert b"SECRET" not in written.read_bytes()
            assert b"cm9vdDp4" not in written.read_bytes()  # base64 of "root:x"


def test_d15_annotate_export_never_writes_outside_out(tmp_path: Path) -> None:
    """D15: `harness annotate --export --out DIR` linked `DIR/../escape.wav` for a clip
    path `../escape.wav`."""
    dataset = write_tiny_dataset(tmp_path / "dataset", n_items=2)
    store = RankingStore(tmp_path / "db.sqlite", load_dataset(dataset))
    (tmp_path / "escape.wav").write_bytes(b"not yours")
    _set_audio(dataset, "../escape.wav")
    out = tmp_path / "exports" / "out"
    with pytest.raises(HarnessError, match="leaves the folder"):
        export_annotations(dataset, store, out)
    assert not (tmp_path / "exports" / "escape.wav").exists()


def test_d15_construct_stage4_never_writes_outside_out(tmp_path: Path) -> None:
    """D15: `harness construct stage4 --out DIR` wrote `DIR/../escape.wav`."""
    dataset = write_tiny_dataset(tmp_path / "dataset", n_items=2)
    items = [json.loads(x) for x in (dataset / "items.jsonl").read_text().splitlines()]
    for item in items:
        best = item.pop("human_ranking")
        item["annotations"] = [best, best]
    (dataset / "items.jsonl").write_text("".join(json.dumps(x) + "\n" for x in items))
    (tmp_path / "escape.wav").write_bytes((dataset / "audio" / "c0_0.wav").read_bytes())
    _set_audio(dataset, "../escape.wav")
    out = tmp_path / "final" / "out"
    with pytest.raises(HarnessError, match="leaves the folder"):
        run_stage4(dataset, out)
    assert not (tmp_path / "final" / "escape.wav").exists()


def _musicrs_row(name: str) -> dict[str, object]:
    return {
        "name": name,
        "query": "something calm",
        "combined_text": "anything calm?",
        "source_subreddit": "jazz",
        "final_candidates": ["A", "B"],
        "limited_gt": ["A"],
    }


def test_d17_a_thread_name_leaving_the_audio_folder_is_refused(tmp_path: Path) -> None:
    """D17: `harness import musicrs --audio DIR` with a thread named `../x` read the audio of
    `DIR/../x`."""
    import numpy as np
    import soundfile

    (tmp_path / "x").mkdir()
    soundfile.write(tmp_path / "x" / "1.wav", np.zeros(800), 8000)
    (tmp_path / "audio").mkdir()
    source = tmp_path / "src.jsonl"
    source.write_text(json.dumps(_musicrs_row("../x")) + "\n")
    with pytest.raises(DatasetError, match=r"src\.jsonl:1: .*thread name"):
        import_musicrs(source, tmp_path / "out", audio=tmp_path / "audio")
    assert not list((tmp_path / "out").rglob("*.wav")) if (tmp_path / "out").exists() else True


def test_d18_out_on_an_existing_dataset_is_refused_unless_overwrite(tmp_path: Path) -> None:
    """D18: `--out` on an existing dataset silently overwrote it."""
    existing = write_tiny_dataset(tmp_path / "mine", n_items=1)
    before = (existing / "items.jsonl").read_bytes()
    source = tmp_path / "src.jsonl"
    source.write_text(json.dumps(_musicrs_row("t1")) + "\n")
    result = CliRunner().invoke(app, ["import", "musicrs", str(source), "--out", str(existing)])
    assert result.exit_code == 2 and "not empty" in result.stderr, result.output
    assert (existing / "items.jsonl").read_bytes() == before
    # --overwrite replaces a dataset the importer wrote, never a folder holding other files
    forced = CliRunner().invoke(
        app, ["import", "musicrs", str(source), "--out", str(existing), "--overwrite"]
    )
    assert forced.exit_code == 2 and "audio" in forced.stderr, forced.output
    assert (existing / "items.jsonl").read_bytes() == before
    fresh = tmp_path / "imported"
    for flags in ([], ["--overwrite"]):
        again = CliRunner().invoke(
            app, ["import", "musicrs", str(source), "--out", str(fresh), *flags]
        )
        assert again.exit_code == 0, again.output


@given(st.text(max_size=40))
def test_contained_paths_never_leave_their_folder(relative: str) -> None:
    """The containment check, over any text: what it accepts stays under the folder."""
    root = Path("/data/set")
    try:
        joined = contained(root, relative)
    except UnsafePath:
        return
    assert joined.is_relative_to(root) and joined != root
    assert ".." not in joined.relative_to(root).parts
    assert inside(relative).parts == joined.relative_to(root).parts
