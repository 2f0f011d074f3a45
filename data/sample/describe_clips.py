"""How the sample clips were chosen and how their captions were drafted.

Nobody listened to these clips. A caption is made only from what is known
about the source track and from features measured on the exact clip:

* known: the track's mood folder (calm, energetic, happy, nostalgic, tender),
  its acoustic/electronic label, and the tempo and key that the package's
  LICENSE-MUSIC lists as the generation settings of each track;
* measured (librosa, numpy) on the clip as ``build_audio.py`` renders it
  (24 kHz mono, 16-bit): tempo estimate, RMS level, spectral centroid,
  onset density and dynamic range.

Commands::

    python data/sample/describe_clips.py propose > clips.jsonl   # choose offsets (skeleton)
    python data/sample/describe_clips.py describe               # print features + drafts
    python data/sample/describe_clips.py describe --write       # store them in clips.jsonl
    python data/sample/describe_clips.py check                  # stored values reproduce?

Needs librosa in addition to what build_audio.py needs.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from build_audio import (
    DATASET_DIR,
    DISTRIBUTION,
    PINNED_VERSION,
    TARGET_SR,
    BuildError,
    cut_clip,
    decode,
    installed_version,
    load_clips,
    package_root,
    to_pcm16,
)

FloatArray = npt.NDArray[np.float64]

CLIP_S = 10.0
LICENSE = "MIT"
# Frame parameters for every measurement (24 kHz input).
N_FFT = 2048
HOP = 512
# A candidate window is rejected if any 1 s block in it is quieter than this.
SILENCE_DB = -35.0


@dataclass(frozen=True)
class TrackMeta:
    """One row of the LICENSE-MUSIC table: the settings the track was generated with."""

    mood: str
    label: str  # acoustic | electronic
    bpm: int
    key: str
    seed: int


@dataclass(frozen=True)
class Features:
    tempo_bpm: float  # librosa tempo estimate on the clip
    rms_db: float  # overall RMS level, dBFS
    centroid_hz: float  # mean spectral centroid
    onset_rate: float  # detected onsets per second
    dynamic_range_db: float  # 95th minus 10th percentile of frame RMS (dB)


# --------------------------------------------------------------------------- known metadata

_ROW = re.compile(
    r"^\s*(?P<name>[a-z]+_(?:acoustic|electronic)_\w+)\.opus\s+(?P<bpm>\d+)\s*bpm\s+"
    r"(?P<key>[A-G][b#]?\s+(?:major|minor))\s+seed\s+(?P<seed>\d+)\s+\[(?P<label>\w+)\]",
    re.MULTILINE,
)


def license_text() -> str:
    from importlib.metadata import distribution

    dist = distribution(DISTRIBUTION)
    for f in dist.files or []:
        if f.name == "LICENSE-MUSIC":
            return str(f.read_text(encoding="utf-8"))
    raise BuildError("LICENSE-MUSIC not found in the dist-info of " + DISTRIBUTION)


def track_table() -> dict[str, TrackMeta]:
    """Track stem -> generation settings, parsed from LICENSE-MUSIC."""
    table: dict[str, TrackMeta] = {}
    for m in _ROW.finditer(license_text()):
        name = m["name"]
        table[name] = TrackMeta(
            mood=name.split("_")[0],
            label=m["label"],
            bpm=int(m["bpm"]),
            key=re.sub(r"\s+", " ", m["key"]),
            seed=int(m["seed"]),
        )
    return table


def list_tracks() -> list[str]:
    """Package-relative paths of all tracks, sorted."""
    root = package_root()
    return sorted(p.relative_to(root).as_posix() for p in (root / "tracks").rglob("*.opus"))


# --------------------------------------------------------------------------- measurement


def rendered_signal(track: str, start_s: float, duration_s: float) -> FloatArray:
    """The clip exactly as written to the WAV file (after 16-bit quantisation)."""
    signal = cut_clip(package_root() / track, start_s, duration_s)
    return to_pcm16(signal).astype(np.float64) / 32768.0


def measure(y: FloatArray, sr: int = TARGET_SR) -> Features:
    import librosa

    y32 = y.astype(np.float32)
    onset_env = librosa.onset.onset_strength(y=y32, sr=sr, hop_length=HOP)
    tempo = float(
        np.atleast_1d(librosa.feature.tempo(onset_envelope=onset_env, sr=sr, hop_length=HOP))[0]
    )
    onsets = librosa.onset.onset_detect(
        onset_envelope=onset_env, sr=sr, hop_length=HOP, units="frames"
    )
    frame_rms = librosa.feature.rms(y=y32, frame_length=N_FFT, hop_length=HOP)[0]
    frame_db = 20.0 * np.log10(np.maximum(frame_rms, 1e-10))
    centroid = librosa.feature.spectral_centroid(y=y32, sr=sr, n_fft=N_FFT, hop_length=HOP)[0]
    # Weight the centroid by frame energy so near-silent frames do not pull it around.
    weights = frame_rms[: centroid.shape[0]] ** 2
    centroid_hz = float(np.sum(centroid * weights) / max(float(np.sum(weights)), 1e-20))
    duration = y.shape[0] / sr
    return Features(
        tempo_bpm=round(tempo, 1),
        rms_db=round(float(20.0 * np.log10(max(float(np.sqrt(np.mean(y**2))), 1e-10))), 1),
        centroid_hz=round(centroid_hz, 1),
        onset_rate=round(len(onsets) / duration, 1),
        dynamic_range_db=round(float(np.percentile(frame_db, 95) - np.percentile(frame_db, 10)), 1),
    )


# --------------------------------------------------------------------------- offsets


def block_db(track: str, block_s: float = 1.0) -> list[float]:
    data, sr = decode(package_root() / track)
    mono = data.mean(axis=1)
    n = int(block_s * sr)
    return [
        float(20.0 * np.log10(max(float(np.sqrt(np.mean(mono[i : i + n] ** 2))), 1e-10)))
        for i in range(0, mono.shape[0] - n + 1, n)
    ]


def window_ok(track: str, start_s: float, duration_s: float = CLIP_S) -> bool:
    blocks = block_db(track)
    first, last = int(start_s), int(np.ceil(start_s + duration_s))
    return all(b > SILENCE_DB for b in blocks[first:last])


def propose_offsets(track: str, index: int) -> list[float]:
    """Two non-overlapping 10 s windows per track, at offsets that vary from track to track.

    Early window starts at 1.0-4.0 s (skipping any fade-in), late window ends
    0.5-3 s before the end of the track (skipping the fade-out). Both must
    pass the silence check.
    """
    data, sr = decode(package_root() / track)
    length = data.shape[0] / sr
    early = 1.0 + (index % 4)
    late = float(np.floor((length - CLIP_S - 0.5 - (index % 3) * 1.0) * 2.0) / 2.0)
    if late < early + CLIP_S:
        late = early + CLIP_S
    offsets = [o for o in (early, late) if o + CLIP_S <= length and window_ok(track, o)]
    if not offsets:
        raise BuildError(f"no usable window in {track}")
    return offsets


def propose() -> list[dict[str, Any]]:
    clips: list[dict[str, Any]] = []
    for index, track in enumerate(list_tracks()):
        for start in propose_offsets(track, index):
            cid = f"c{len(clips) + 1:03d}"
            clips.append(
                {
                    "id": cid,
                    "audio": f"audio/{cid}.wav",
                    "caption": "",
                    "aspects": [],
                    "source": {
                        "package": DISTRIBUTION,
                        "version": PINNED_VERSION,
                        "track": track,
                        "start_s": start,
                        "duration_s": CLIP_S,
                        "license": LICENSE,
                    },
                }
            )
    return clips


# --------------------------------------------------------------------------- wording

# Fixed thresholds (constants, not fitted per run), set once after looking at
# the spread of the 56 measured clips so that the words separate them.
TEMPO_WORDS = ((80, "slow"), (100, "moderate"), (120, "lively"), (10_000, "fast"))
# Metrical levels at which a beat tracker commonly locks on (half, two-thirds, ...).
TEMPO_RATIOS = (0.5, 2 / 3, 0.75, 1.0, 4 / 3, 1.5, 2.0)


def tempo_word(bpm: float) -> str:
    return next(word for limit, word in TEMPO_WORDS if bpm < limit)


def energy_score(f: Features, bpm: float) -> float:
    """Level, note activity and tempo together (0 is a mid-energy clip of this set)."""
    return (f.rms_db + 15.0) / 2.5 + (f.onset_rate - 4.5) + (bpm - 100.0) / 20.0


def energy_word(score: float) -> str:
    if score < -1.5:
        return "low"
    if score < 1.5:
        return "moderate"
    return "high"


def brightness_word(centroid_hz: float) -> str:
    if centroid_hz < 1300:
        return "dark"
    if centroid_hz < 1800:
        return "warm"
    if centroid_hz < 2400:
        return "bright"
    return "very bright"


def level_word(rms_db: float) -> str:
    if rms_db < -16.5:
        return "soft"
    if rms_db < -13.5:
        return "medium-level"
    return "loud"


def texture_phrase(onset_rate: float) -> str:
    if onset_rate < 2.5:
        return "a sparse, sustained texture"
    if onset_rate < 4.0:
        return "a steady, moderately active texture"
    if onset_rate < 5.0:
        return "a busy texture"
    return "a dense, note-heavy texture"


def dynamics_phrase(dynamic_range_db: float) -> str:
    if dynamic_range_db < 7.0:
        return "an even level"
    if dynamic_range_db < 11.0:
        return "gentle swells"
    return "strong swells and drops"


def tempo_agrees(measured: float, nominal: int, tolerance: float = 0.08) -> bool:
    """The measured tempo is the generation tempo at some metrical level.

    8% tolerance: librosa's tempo estimate is quantised to tempogram bins that
    are about 5% apart near 150 BPM at this hop length (e.g. 148.0 and 156.2).
    """
    return any(abs(measured - nominal * k) <= tolerance * nominal * k for k in TEMPO_RATIOS)


def draft(meta: TrackMeta, f: Features) -> tuple[str, list[str]]:
    """Caption and aspects from the known labels plus the measured features.

    The tempo stated is the generation tempo when the measured estimate is
    consistent with it (same beat at another metrical level), else the estimate.
    """
    bpm = meta.bpm if tempo_agrees(f.tempo_bpm, meta.bpm) else round(f.tempo_bpm)
    tempo = tempo_word(bpm)
    energy = energy_word(energy_score(f, bpm))
    bright = brightness_word(f.centroid_hz)
    article = "An" if meta.mood[0] in "aeiou" else "A"
    caption = (
        f"{article} {meta.mood} {meta.label} piece in {meta.key} at a {tempo} tempo (~{bpm} BPM): "
        f"a {level_word(f.rms_db)}, {bright}-toned sound with {texture_phrase(f.onset_rate)} "
        f"and {dynamics_phrase(f.dynamic_range_db)}; {energy} energy overall."
    )
    aspects = [meta.mood, meta.label, f"{tempo} tempo", f"{energy} energy", bright]
    return caption, aspects


# --------------------------------------------------------------------------- commands


def describe(clips: list[dict[str, Any]]) -> list[dict[str, Any]]:
    table = track_table()
    out: list[dict[str, Any]] = []
    for clip in clips:
        src = clip["source"]
        stem = Path(src["track"]).stem
        meta = table[stem]
        f = measure(rendered_signal(src["track"], float(src["start_s"]), float(src["duration_s"])))
        caption, aspects = draft(meta, f)
        new_src = {k: v for k, v in src.items() if k not in ("generation", "features")}
        new_src["generation"] = {"bpm": meta.bpm, "key": meta.key, "seed": meta.seed}
        new_src["features"] = asdict(f)
        out.append({**clip, "caption": caption, "aspects": aspects, "source": new_src})
    return out


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    path.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="choose sample clips and draft their captions")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("propose", help="print a clips.jsonl skeleton with chosen offsets")
    d = sub.add_parser("describe", help="measure features and draft captions")
    d.add_argument("--write", action="store_true", help="store results in clips.jsonl")
    sub.add_parser("check", help="verify stored features reproduce")
    parser.add_argument("--dataset", type=Path, default=DATASET_DIR)
    args = parser.parse_args(argv)

    if installed_version() != PINNED_VERSION:
        print(
            f"warning: {DISTRIBUTION} {installed_version()} installed, expected {PINNED_VERSION}",
            file=sys.stderr,
        )
    if args.command == "propose":
        for row in propose():
            print(json.dumps(row, ensure_ascii=False))
        return 0

    clips = load_clips(args.dataset)
    described = describe(clips)
    if args.command == "check":
        bad = [
            c["id"]
            for c, n in zip(clips, described, strict=True)
            if c["source"].get("features") != n["source"]["features"]
            or (c["caption"], c["aspects"]) != (n["caption"], n["aspects"])
        ]
        print(
            f"describe_clips: {len(clips) - len(bad)}/{len(clips)} clips reproduce (features, caption, aspects)"
            + (f"; differ: {bad}" if bad else "")
        )
        return 1 if bad else 0
    if args.command == "describe" and args.write:
        write_jsonl(args.dataset / "clips.jsonl", described)
        print(f"describe_clips: wrote {len(described)} clips to {args.dataset / 'clips.jsonl'}")
        return 0
    for c in described:
        f = c["source"]["features"]
        print(
            f"{c['id']} {Path(c['source']['track']).stem:28s} {c['source']['start_s']:5.1f} "
            f"gen={c['source']['generation']['bpm']:3d} tempo={f['tempo_bpm']:6.1f} rms={f['rms_db']:6.1f} "
            f"cent={f['centroid_hz']:7.1f} ons={f['onset_rate']:4.1f} dr={f['dynamic_range_db']:5.1f}\n    {c['caption']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
