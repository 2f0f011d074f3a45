"""Write reference_tags.json: what the ORIGINAL musicnn 0.1.0 code, run under TensorFlow,
says about the real clips in $BGM_JUDGE_REALDATA/audio (default: ../shared/realdata/audio
beside the repository). test_reference.py checks the PyTorch port against it.

Run it in a throwaway environment, never the project's (TensorFlow is no dependency):

    python3 -m venv /work/tfref-venv
    /work/tfref-venv/bin/pip install tensorflow-cpu==2.15.1 librosa==0.11.0 'numpy<2'
    /work/tfref-venv/bin/pip install --no-deps musicnn==0.1.0
    /work/tfref-venv/bin/python tests/providers/scorers/musicnn/make_reference.py

Use the librosa (and soxr) version the project installs: the reference must see the same
resampling and spectrogram as the port. NumPy must be < 2 (TensorFlow 2.15 needs it), which
is also what makes musicnn's `10000 * float16_array` promote to float32, as it did for its
authors. Each model runs through `musicnn.extractor.extractor` unchanged, and the mean of
its taggram over windows is recorded (what `musicnn.tagger.top_tags` ranks).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import importlib.metadata
import json
import os
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[3]
REALDATA = Path(os.environ.get("BGM_JUDGE_REALDATA", REPO.parent / "shared" / "realdata"))
AUDIO = REALDATA / "audio"
OUT = HERE / "reference_tags.json"
MODELS = ("MTT_musicnn", "MSD_musicnn", "MTT_vgg", "MSD_vgg")
DIGITS = 7


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--audio", type=Path, default=AUDIO)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    args = parser.parse_args()

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import librosa
    import numpy as np
    import tensorflow as tf

    # musicnn's code runs as published: extractor.py itself switches TensorFlow 2 to graph
    # mode (tf.compat.v1.disable_eager_execution) and builds with tf.compat.v1.layers.
    from musicnn import extractor as original

    clips = sorted(args.audio.glob("*.wav"))
    if not clips:
        raise SystemExit(f"no .wav files in {args.audio}")
    tags: dict[str, dict[str, dict[str, float]]] = {}
    windows: dict[str, int] = {}
    labels: dict[str, list[str]] = {}
    for model in args.models:
        tags[model] = {}
        for clip in clips:
            taggram, names = original.extractor(
                str(clip), model=model, input_length=3, input_overlap=False, extract_features=False
            )
            mean = np.mean(taggram, axis=0)
            tags[model][clip.name] = {
                name: round(float(p), DIGITS) for name, p in zip(names, mean, strict=True)
            }
            windows[clip.name] = int(taggram.shape[0])
            labels[model] = list(names)
            print(f"{model} {clip.name}: {int(taggram.shape[0])} windows", file=sys.stderr)

    fixture: dict[str, Any] = {
        "provenance": {
            "what": "mean over 3 s windows of musicnn's sigmoid tag probabilities "
            "(musicnn.extractor.extractor, input_length=3, input_overlap=False)",
            "script": "tests/providers/scorers/musicnn/make_reference.py",
            "date": datetime.date.today().isoformat(),
            "musicnn": importlib.metadata.version("musicnn"),
            "tensorflow": tf.__version__,
            "librosa": librosa.__version__,
            "numpy": np.__version__,
            "soxr": importlib.metadata.version("soxr"),
            "python": sys.version.split()[0],
            "audio": "../shared/realdata/audio (not in the repository)",
            "clips": {
                clip.name: {"sha256": sha256(clip), "windows": windows[clip.name]} for clip in clips
            },
        },
        "labels": labels,
        "tags": tags,
    }
    args.out.write_text(json.dumps(fixture, indent=1, sort_keys=False) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
