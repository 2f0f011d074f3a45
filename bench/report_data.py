"""Runs for the report benchmark (bench/report_scale.py): pools of `pool` candidates, one
gold each, from a catalogue of clips, as a `rank` dataset (short captions, linked audio) and a
MuseChat-style `refine` set built by `harness construct refine-set` from a synthetic
MusicCaps-format CSV (captions of MusicCaps' length, about 290 characters); runs of the seeded
`random` scorer made by `harness run` (one sweep, whole process)."""

from __future__ import annotations

import csv
import json
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile
import yaml

from bench.common import WORDS, checked, harness_command, run_timed
from harness.construct.stage1 import MUSICCAPS_COLUMNS

INSTRUMENTS = ["piano", "acoustic guitar", "electric guitar", "strings", "synth pad", "drums"]
INSTRUMENTS += ["bass", "flute", "trumpet", "choir", "organ", "violin", "cello", "harp"]
MOODS = ["mellow", "energetic", "sad", "joyful", "dreamy", "dark", "romantic", "tense"]
MOODS += ["calm", "playful", "epic", "nostalgic"]
GENRES = ["jazz", "rock", "ambient", "folk", "hip hop", "classical", "pop", "blues", "techno"]


@dataclass(frozen=True)
class Scale:
    items: int  # per report run
    pool: int  # candidates per item, the gold included
    catalogue: int  # distinct clips the pools draw from
    many_runs: int  # runs of the many-run report
    many_items: int  # items (of 4 candidates) in the many-run report


def _caption(rng: random.Random) -> tuple[str, list[str]]:
    """A MusicCaps-like caption (two to four sentences, ~290 characters) and its aspects."""
    genre, mood, other = rng.choice(GENRES), rng.choice(MOODS), rng.choice(MOODS)
    lead, second, third = rng.sample(INSTRUMENTS, 3)
    aspects = [genre, mood, other, f"{lead} melody", f"{second} accompaniment", third]
    sentences = [
        f"This {genre} song features a {mood} {lead} melody played over {second} accompaniment.",
        f"The {third} comes in later and adds a {other} layer to the arrangement.",
        f"The tempo is {rng.choice(['slow', 'medium', 'fast'])} and the atmosphere is {mood}.",
        f"It sounds like something you would hear at a {rng.choice(WORDS)} {rng.choice(WORDS)}.",
    ]
    return " ".join(sentences[: rng.randint(3, 4)]), aspects


def musiccaps_csv(path: Path, rows: int, seed: int = 0) -> Path:
    """A MusicCaps-format CSV of `rows` synthetic clips."""
    rng = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(MUSICCAPS_COLUMNS)
        for k in range(rows):
            caption, aspects = _caption(rng)
            writer.writerow(
                [f"yt{k:07d}", 30, 40, "/m/04rlf", repr(aspects), caption, 1, False, False]
            )
    return path


def refine_dataset(scale: Scale, root: Path) -> Path:
    """MuseChat's shape via `harness construct refine-set` (text-only candidates)."""
    out = root / f"refine_{scale.items}x{scale.pool}"
    if (out / "items.jsonl").is_file():
        return out
    source = musiccaps_csv(root / f"musiccaps_{scale.catalogue}.csv", scale.catalogue)
    command = [
        *harness_command(),
        "construct",
        "refine-set",
        "--musiccaps",
        str(source),
        "--out",
        str(out),
    ]
    command += ["--pool", str(scale.pool), "--items", str(scale.items), "--overwrite"]
    checked(run_timed(command), "harness construct refine-set")
    return out


def rank_dataset(scale: Scale, root: Path) -> Path:
    """Dialogues with a pool each (the gold and `pool - 1` others of the catalogue), short
    captions and a (very short) audio file per clip, linked from the report."""
    out = root / f"rank_{scale.items}x{scale.pool}_{scale.catalogue}"
    if (out / "items.jsonl").is_file():
        return out
    (out / "audio").mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    tone = 0.1 * np.sin(np.linspace(0, 2 * np.pi * 20, 400)).astype(np.float32)
    clips = []
    for k in range(scale.catalogue):
        cid = f"c{k:05d}"
        soundfile.write(out / "audio" / f"{cid}.wav", tone, 8000, "PCM_16")
        caption = f"synthetic tone around {110 + k % 800} Hz, {rng.choice(MOODS)}"
        clips.append({"id": cid, "audio": f"audio/{cid}.wav", "caption": caption})
    items = []
    for i in range(scale.items):
        pool = [clips[k]["id"] for k in rng.sample(range(scale.catalogue), scale.pool)]
        turns = [
            {"speaker": "AB"[t % 2], "text": " ".join(rng.choices(WORDS, k=10)).capitalize()}
            for t in range(6)
        ]
        items.append(
            {"id": f"d{i:04d}", "dialogue": turns, "candidates": pool, "relevant": [pool[0]]}
        )
    (out / "clips.jsonl").write_text("".join(json.dumps(c) + "\n" for c in clips))
    (out / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    return out


def random_sweep(
    work: Path, name: str, dataset: Path, n_runs: int, *, refine: bool = False
) -> list[Path]:
    """`n_runs` runs of the seeded random scorer (seeds 1..n) in one `harness run`, with the
    run defaults (1,000 bootstrap resamples); their folders."""
    config: dict[str, object] = {
        "name": name,
        "dataset": str(dataset),
        "providers": [
            {"name": "random", "model": "uniform", "seed": s, "label": f"seed{s}"}
            for s in range(1, n_runs + 1)
        ],
        "inputs": [{"dialogue": "query" if refine else "full", "music": "caption"}],
    }
    if refine:
        config |= {"protocol": "refine", "refine": {"feedback": "aspects", "mention": "both"}}
    experiment = work / f"{name}.yaml"
    experiment.parent.mkdir(parents=True, exist_ok=True)
    experiment.write_text(yaml.safe_dump(config, sort_keys=False))
    results = work / "results"
    command = [*harness_command(), "run", str(experiment), "--results-dir", str(results)]
    command += ["--cache-dir", str(work / "cache"), "--no-progress"]
    checked(run_timed(command), f"harness run {name}")
    runs = sorted(p.parent for p in (results / name).glob("*/metrics.json"))
    if len(runs) != n_runs:
        raise RuntimeError(f"{name}: {len(runs)} runs finished, not {n_runs}")
    return runs
