from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import soundfile
import yaml
from typer.testing import CliRunner

from harness.cli.main import app
from harness.construct.config import load_build_config
from harness.construct.stage1 import MUSICCAPS_COLUMNS
from harness.core.dataset import load_dataset

CLIPS = {
    "pianoA": (["solo piano", "calm", "no voices"], "A calm solo piano piece, slow and gentle."),
    "stringsB": (["string quartet", "sad"], "A sad slow string quartet."),
    "discoC": (["disco", "funky bass", "instrumental"], "An upbeat funky disco groove."),
    "jazzD": (["jazz trio", "relaxed"], "A relaxed jazz trio with brushed drums."),
    "popE": (["pop", "female vocal"], "A pop song with a female singer."),
    "ambF": (["ambient pads"], "Dreamy ambient synth pads."),
    "rockG": (["rock", "crowd cheering"], "Live rock with a cheering crowd."),
}
DIALOGUES = [
    "Shall we sit by the fire ? __eou__ Yes , it is so quiet tonight . __eou__ "
    "I love these calm evenings . __eou__ Me too , let's just relax . __eou__",
    "We won the match ! __eou__ Let's go dance ! __eou__ Put on some music ! __eou__ "
    "This party is great ! __eou__",
    "My old dog died today . __eou__ I'm so sorry . __eou__ He was my best friend . __eou__ "
    "I know , I miss him too . __eou__",
]


def write_inputs(root: Path) -> dict[str, Path]:
    root.mkdir(parents=True, exist_ok=True)
    csv_path = root / "musiccaps.csv"
    with csv_path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(MUSICCAPS_COLUMNS)
        for ytid, (aspects, caption) in CLIPS.items():
            writer.writerow([ytid, 0, 10, "/m/04rlf", repr(aspects), caption, 1, "False", "False"])
    audio = root / "audio"
    audio.mkdir()
    t = np.arange(800) / 8000
    for i, ytid in enumerate(CLIPS):
        if ytid != "ambF":  # no audio: not eligible
            soundfile.write(
                audio / f"{ytid}.wav", 0.1 * np.sin(2 * np.pi * (300 + 50 * i) * t), 8000
            )
    dd = root / "dailydialog"
    dd.mkdir()
    (dd / "dialogues_text.txt").write_text("\n".join(DIALOGUES) + "\n")
    (dd / "dialogues_emotion.txt").write_text("0 0 4 4\n4 4 4 4\n5 5 5 5\n")
    return {"musiccaps": csv_path, "audio_dir": audio, "dailydialog": dd}


def write_build_file(root: Path, inputs: dict[str, Path], out: Path, seed: int = 0) -> Path:
    build = {
        "out": str(out),
        "seed": seed,
        **{k: str(v) for k, v in inputs.items()},
        "stage2": {
            "min_turns": 2,
            "min_words": 5,
            "provider": {
                "name": "mock",
                "answers": {
                    "*": '{"summary": "Two people talk about something that matters to them, with feeling; music with a matching mood and gentle tempo would suit."}'
                },
            },
        },
        "stage3": {"top_fraction": 1.0},
    }
    path = root / f"build-{out.name}.yaml"
    path.write_text(yaml.safe_dump(build))
    return path


def test_build_all_twice_gives_identical_datasets(tmp_path: Path) -> None:
    inputs = write_inputs(tmp_path / "in")
    runner = CliRunner()
    env = {"BGM_JUDGE_CACHE": str(tmp_path / "cache")}
    outs = []
    for name in ("a", "b"):
        build_file = write_build_file(tmp_path, inputs, tmp_path / name)
        result = runner.invoke(app, ["construct", "all", str(build_file)], env=env)
        assert result.exit_code == 0, result.output
        outs.append(tmp_path / name / "dataset")
    assert "kept: 5" in result.output and "label mismatches" in result.output
    trees = [
        {str(p.relative_to(o)): p.read_bytes() for p in sorted(o.rglob("*")) if p.is_file()}
        for o in outs
    ]
    assert trees[0] == trees[1]
    dataset = load_dataset(outs[0])
    assert len(dataset.items) == 3
    assert set(dataset.clips) <= {"pianoA", "stringsB", "discoC", "jazzD"}
    stage1 = json.loads((tmp_path / "a/stage1/report.json").read_text())
    assert (
        stage1["removed_by_rule"]["vocals"] == 1 and stage1["removed_by_rule"]["sound_effects"] == 1
    )
    # The stage 2 captions came from the cache the second time.
    stage2 = json.loads((tmp_path / "b/stage2/report.json").read_text())
    assert stage2["captions"]["model_calls"] == 0 and stage2["captions"]["cached"] == 3
    # Re-running into a built folder needs --overwrite.
    again = runner.invoke(app, ["construct", "all", str(build_file)], env=env)
    assert again.exit_code == 2 and "--overwrite" in again.output


def test_single_stages_from_the_command_line(tmp_path: Path) -> None:
    inputs = write_inputs(tmp_path / "in")
    runner = CliRunner()
    s1 = runner.invoke(
        app, ["construct", "stage1", str(inputs["musiccaps"]), "--out", str(tmp_path / "s1")]
    )
    assert s1.exit_code == 0, s1.output
    s2 = runner.invoke(
        app, ["construct", "stage2", str(inputs["dailydialog"]), "--out", str(tmp_path / "s2")]
    )
    assert s2.exit_code == 2 and "no dialogue passes the filters" in s2.output
    config = tmp_path / "lenient.yaml"
    config.write_text(yaml.safe_dump({"stage2": {"min_turns": 2, "min_words": 1}}))
    s2 = runner.invoke(
        app,
        [
            "construct",
            "stage2",
            str(inputs["dailydialog"]),
            "--out",
            str(tmp_path / "s2"),
            "--config",
            str(config),
        ],
    )
    assert s2.exit_code == 0, s2.output
    s3 = runner.invoke(
        app,
        [
            "construct", "stage3",
            "--clips", str(tmp_path / "s1/kept.jsonl"),
            "--dialogues", str(tmp_path / "s2/dialogues.jsonl"),
            "--audio-dir", str(inputs["audio_dir"]),
            "--out", str(tmp_path / "ds"),
            "--query", "dialogue",
        ],
    )  # fmt: skip
    assert s3.exit_code == 0, s3.output
    assert len(load_dataset(tmp_path / "ds").items) == 3


def test_build_file_errors_name_the_field(tmp_path: Path) -> None:
    path = tmp_path / "b.yaml"
    path.write_text(yaml.safe_dump({"stage3": {"seed": 4}}))
    result = CliRunner().invoke(app, ["construct", "all", str(path)])
    assert result.exit_code == 2 and "set the seed once" in result.output
    path.write_text(yaml.safe_dump({"stage1": {"rulez": {}}}))
    result = CliRunner().invoke(app, ["construct", "stage1", "x.csv", "--config", str(path)])
    assert result.exit_code == 2 and "stage1.rulez" in result.output
    path.write_text(yaml.safe_dump({"seed": 1}))
    assert load_build_config(path).seeded()[1].seed == 1
    result = CliRunner().invoke(app, ["construct", "all", str(path)])
    assert result.exit_code == 2 and "musiccaps" in result.output


def test_build_is_a_hidden_alias_of_construct(tmp_path: Path) -> None:
    path = tmp_path / "b.yaml"
    path.write_text(yaml.safe_dump({"seed": 1}))
    result = CliRunner().invoke(app, ["build", "all", str(path)])
    assert result.exit_code == 2 and "musiccaps" in result.output
    listed = CliRunner().invoke(app, ["--help"]).output
    assert "construct" in listed and " build " not in listed
