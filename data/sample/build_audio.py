"""Rebuild the sample dataset's audio clips from the installed music package.

Usage::

    python data/sample/build_audio.py [--force] [--dataset DIR]

Reads ``clips.jsonl`` next to this script and writes ``audio/<id>.wav`` for
every clip: the track named in ``source.track`` (a path inside the
``immich_memories_music`` package) is decoded with soundfile, cut to
``[start_s, start_s + duration_s]``, downmixed to mono, resampled to 24 kHz
with ``scipy.signal.resample_poly``, given a 20 ms linear fade in and out and
written as 16-bit PCM WAV. The same input gives byte-identical output.
Clips that already exist are skipped unless ``--force`` is given.

Only numpy, scipy, soundfile and the music package are needed
(``pip install immich-memories-music==0.1.0``).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.resources
import io
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from math import gcd
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import soundfile as sf
from scipy.signal import resample_poly

PACKAGE = "immich_memories_music"
DISTRIBUTION = "immich-memories-music"
PINNED_VERSION = "0.1.0"
INSTALL_HINT = f"pip install {DISTRIBUTION}=={PINNED_VERSION}"

TARGET_SR = 24_000
FADE_S = 0.020
DATASET_DIR = Path(__file__).resolve().parent

FloatArray = npt.NDArray[np.float64]
Int16Array = npt.NDArray[np.int16]


class BuildError(RuntimeError):
    """A clip cannot be built (missing package, unknown track, bad offsets)."""


def package_root() -> Path:
    """Folder of the installed music package; a clear error if it is missing."""
    try:
        root = importlib.resources.files(PACKAGE)
    except ModuleNotFoundError as exc:
        raise BuildError(
            f"the music package '{DISTRIBUTION}' is not installed; run: {INSTALL_HINT}"
        ) from exc
    path = Path(str(root))
    if not path.is_dir():
        raise BuildError(f"{PACKAGE} is not installed as a plain folder ({root}); {INSTALL_HINT}")
    return path


def installed_version() -> str:
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def track_path(track: str) -> Path:
    """Absolute path of a track given relative to the package, e.g. ``tracks/calm/x.opus``."""
    path = package_root() / track
    if not path.is_file():
        raise BuildError(f"track {track!r} not found in {PACKAGE} ({path})")
    return path


@lru_cache(maxsize=4)
def decode(path: Path) -> tuple[FloatArray, int]:
    """Decode a whole file to float64 frames x channels (decoded once, then sliced).

    The whole file is decoded rather than seeking, so the samples of a clip do
    not depend on how the decoder handles a seek (Opus pre-roll).
    """
    data, sr = sf.read(str(path), dtype="float64", always_2d=True)
    data.setflags(write=False)
    return data, int(sr)


def cut_clip(
    path: Path,
    start_s: float,
    duration_s: float,
    target_sr: int = TARGET_SR,
    fade_s: float = FADE_S,
) -> FloatArray:
    """Cut ``[start_s, start_s + duration_s]`` of a file to a mono float signal at ``target_sr``.

    Returns exactly ``round(duration_s * target_sr)`` samples in [-1, 1].
    """
    data, sr = decode(path)
    first = round(start_s * sr)
    count = round(duration_s * sr)
    if start_s < 0 or duration_s <= 0 or first + count > data.shape[0]:
        raise BuildError(
            f"{path.name}: segment [{start_s}, {start_s + duration_s}] s is outside "
            f"the track (length {data.shape[0] / sr:.2f} s)"
        )
    mono = data[first : first + count].mean(axis=1)
    g = gcd(target_sr, sr)
    resampled = np.asarray(resample_poly(mono, target_sr // g, sr // g), dtype=np.float64)
    n_out = round(duration_s * target_sr)
    out = np.zeros(n_out, dtype=np.float64)
    n = min(n_out, resampled.shape[0])
    out[:n] = resampled[:n]
    n_fade = min(round(fade_s * target_sr), n_out // 2)
    if n_fade > 0:
        ramp = np.linspace(0.0, 1.0, n_fade, dtype=np.float64)
        out[:n_fade] *= ramp
        out[n_out - n_fade :] *= ramp[::-1]
    return np.clip(out, -1.0, 1.0)


def to_pcm16(signal: FloatArray) -> Int16Array:
    """Quantise [-1, 1] floats to int16 by rounding (explicit, so no library default matters)."""
    return np.clip(np.round(signal * 32767.0), -32768, 32767).astype(np.int16)


def encode_wav(pcm: Int16Array, sr: int = TARGET_SR) -> bytes:
    """16-bit PCM mono WAV bytes."""
    buffer = io.BytesIO()
    sf.write(buffer, pcm, sr, format="WAV", subtype="PCM_16")
    return buffer.getvalue()


def render_clip(clip: dict[str, Any]) -> bytes:
    """WAV bytes of one clip record from clips.jsonl."""
    source = clip["source"]
    signal = cut_clip(
        track_path(source["track"]), float(source["start_s"]), float(source["duration_s"])
    )
    return encode_wav(to_pcm16(signal))


def load_clips(dataset_dir: Path) -> list[dict[str, Any]]:
    clips_file = dataset_dir / "clips.jsonl"
    clips: list[dict[str, Any]] = []
    with clips_file.open(encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                clips.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise BuildError(f"{clips_file}:{line_no}: invalid JSON ({exc})") from exc
    return clips


@contextmanager
def _atomic_target(path: Path) -> Iterator[Path]:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def build(dataset_dir: Path = DATASET_DIR, force: bool = False) -> tuple[int, int]:
    """Write every missing clip (all with ``force``). Returns (written, skipped)."""
    clips = load_clips(dataset_dir)
    package_root()  # fail early with the install hint
    version = installed_version()
    wanted = {str(c["source"].get("version", PINNED_VERSION)) for c in clips}
    if version not in wanted:
        print(
            f"build_audio: warning: {DISTRIBUTION} {version} is installed, clips.jsonl was "
            f"made from {', '.join(sorted(wanted))}; offsets may not match ({INSTALL_HINT})",
            file=sys.stderr,
        )
    written = skipped = 0
    for clip in clips:
        target = dataset_dir / clip["audio"]
        if target.exists() and not force:
            skipped += 1
            continue
        data = render_clip(clip)
        target.parent.mkdir(parents=True, exist_ok=True)
        with _atomic_target(target) as tmp:
            tmp.write_bytes(data)
        written += 1
    return written, skipped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--force", action="store_true", help="rebuild clips that already exist")
    parser.add_argument(
        "--dataset", type=Path, default=DATASET_DIR, help="dataset folder (with clips.jsonl)"
    )
    args = parser.parse_args(argv)
    try:
        written, skipped = build(args.dataset, force=args.force)
    except BuildError as exc:
        print(f"build_audio: error: {exc}", file=sys.stderr)
        return 1
    total = written + skipped
    print(
        f"build_audio: {total} clips in {args.dataset / 'audio'}: "
        f"{written} written, {skipped} already present"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
