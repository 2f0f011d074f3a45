"""(7) musicnn tagging speed on CPU: clips tagged per second and peak RSS of the PyTorch
port (`providers.scorers.musicnn.Tagger`, windows of all clips batched), and, when a Python with
TensorFlow and the musicnn package is at hand, of the original code in the same run.

    python -m bench musicnn                       # as part of the bench suite
    python -m bench.musicnn_speed --clips 64 --tf-python /work/tfref-venv/bin/python

Clips are synthetic 10-second 44.1 kHz WAVs (DialBGM's format), so decoding and
resampling to 16 kHz are part of the cost. Each side runs in its own child process (its
peak RSS is its own, from wait4); the clock starts after the model is loaded and one clip
has been tagged (warm-up), and the load time is reported apart. CPU seconds per clip
(the child's process time) are reported beside clips/s: on a shared machine they move
less with the load than wall time does. The original is timed two
ways: its API as published (`musicnn.extractor.extractor` per clip, which rebuilds the
TensorFlow graph and restores the checkpoint for every clip) and its graph built once with
each clip's windows in one `session.run`. TensorFlow is looked for in `--tf-python`, else
$BGM_JUDGE_TF_PYTHON, else this interpreter; without it only the port is measured.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

from bench.common import BenchResult, DatasetSpec, Size, checked, ratio, run_timed, synth_dataset
from providers.scorers.musicnn import INSTALL_HINT, WHEEL_ENV

MODEL = "MTT_musicnn"
SIZES: dict[Size, DatasetSpec] = {
    "full": DatasetSpec(n_items=1, n_clips=64, seconds=10.0, sample_rate=44100),
    "tiny": DatasetSpec(n_items=1, n_clips=4, seconds=3.5, sample_rate=44100),
}
TF_PYTHON_ENV = "BGM_JUDGE_TF_PYTHON"

# Children print one JSON line: load_s, tag_s (after warm-up), and {clip: mean tags}.
PORT_CHILD = """
import json, sys, time
started = time.perf_counter()
from providers.scorers.musicnn import Tagger
tagger = Tagger.load(sys.argv[1])
clips = sys.argv[2:]
tagger.tag(clips[:1])
load_s = time.perf_counter() - started
started, cpu = time.perf_counter(), time.process_time()
tags = tagger.tag(clips)
tag_s, tag_cpu_s = time.perf_counter() - started, time.process_time() - cpu
print(json.dumps({"load_s": load_s, "tag_s": tag_s, "tag_cpu_s": tag_cpu_s,
                  "tags": dict(zip(clips, tags))}))
"""

TF_CHILD = """
import contextlib, io, json, os, sys, time
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import tensorflow as tf
from musicnn import configuration, extractor, models
model, clips = sys.argv[1], sys.argv[2:]
quiet = contextlib.redirect_stdout(io.StringIO())

def api(clip):
    with quiet:
        taggram, labels = extractor.extractor(clip, model=model, extract_features=False)
    return dict(zip(labels, np.mean(taggram, axis=0).tolist()))

api(clips[0])
started, cpu = time.perf_counter(), time.process_time()
for clip in clips:
    api(clip)
api_s, api_cpu_s = time.perf_counter() - started, time.process_time() - cpu

started = time.perf_counter()
tf.compat.v1.reset_default_graph()
x = tf.compat.v1.placeholder(tf.float32, [None, 187, configuration.N_MELS])
logits = models.define_model(x, False, model, 50)[0]
probabilities = tf.nn.sigmoid(logits)
session = tf.compat.v1.Session()
tf.compat.v1.train.Saver().restore(session, os.path.join(os.path.dirname(models.__file__), model, ""))
labels = configuration.MTT_LABELS if model.startswith("MTT") else configuration.MSD_LABELS

def graph(clip):
    batch, _ = extractor.batch_data(clip, 187, 187)
    return dict(zip(labels, session.run(probabilities, {x: batch}).mean(axis=0).tolist()))

graph(clips[0])
load_s = time.perf_counter() - started
started, cpu = time.perf_counter(), time.process_time()
tags = {clip: graph(clip) for clip in clips}
tag_s, tag_cpu_s = time.perf_counter() - started, time.process_time() - cpu
print(json.dumps({"load_s": load_s, "tag_s": tag_s, "tag_cpu_s": tag_cpu_s, "api_s": api_s,
                  "api_cpu_s": api_cpu_s, "tags": tags, "tensorflow": tf.__version__}))
"""


def tf_python(explicit: str | None = None) -> str | None:
    """A Python that can import TensorFlow and the musicnn package, or None."""
    chosen = explicit or os.environ.get(TF_PYTHON_ENV)
    if chosen:
        return chosen
    have = all(importlib.util.find_spec(m) for m in ("tensorflow", "musicnn"))
    return sys.executable if have else None


def child(python: str, code: str, clips: list[Path], model: str) -> tuple[dict[str, Any], int]:
    """(the child's JSON answer, its peak RSS in bytes)."""
    timed = checked(
        run_timed([python, "-c", code, model, *map(str, clips)], env={"PYTHONPATH": "."}),
        f"{python} musicnn child",
    )
    answer: dict[str, Any] = json.loads(timed.output.strip().splitlines()[-1])
    return answer, timed.max_rss_bytes


def max_difference(a: dict[str, dict[str, float]], b: dict[str, dict[str, float]]) -> float:
    return max(abs(a[clip][tag] - b[clip][tag]) for clip in a for tag in a[clip])


def run(
    size: Size, work: Path, tf: str | None = None, spec: DatasetSpec | None = None
) -> BenchResult:
    spec = spec or SIZES[size]
    if importlib.util.find_spec("musicnn") is None and not os.environ.get(WHEEL_ENV):
        reason = f"musicnn weights not installed ({INSTALL_HINT})"
        return BenchResult("musicnn", f"skipped: {reason}", {"clips": 0}, notes=[reason])
    dataset = synth_dataset(spec, work)
    clips = sorted((dataset / "audio").iterdir())
    port, port_rss = child(sys.executable, PORT_CHILD, clips, MODEL)
    mib = 2**20
    port_rate = len(clips) / port["tag_s"]
    figures: dict[str, Any] = {
        "model": MODEL,
        "clips": len(clips),
        "clip": f"{spec.seconds:g} s mono 16-bit WAV at {spec.sample_rate} Hz",
        "port: clips/s": round(port_rate, 2),
        "port: CPU s per clip": round(port["tag_cpu_s"] / len(clips), 3),
        "port: load + warm-up (s)": round(port["load_s"], 2),
        "port: peak RSS (MiB)": round(port_rss / mib, 1),
    }
    summary = f"{len(clips)} clips of {spec.seconds:g} s: port {port_rate:.1f} clips/s, peak RSS {port_rss / mib:.0f} MiB"
    notes: list[str] = []
    python = tf_python(tf)
    if python is None:
        notes.append(f"TensorFlow not found (set {TF_PYTHON_ENV}): the original was not timed")
    else:
        original, tf_rss = child(python, TF_CHILD, clips, MODEL)
        graph_rate = len(clips) / original["tag_s"]
        api_rate = len(clips) / original["api_s"]
        figures.update(
            {
                "tensorflow": original["tensorflow"],
                "original, graph built once: clips/s": round(graph_rate, 2),
                "original, extractor() per clip: clips/s": round(api_rate, 2),
                "original, graph built once: CPU s per clip": round(
                    original["tag_cpu_s"] / len(clips), 3
                ),
                "original, extractor() per clip: CPU s per clip": round(
                    original["api_cpu_s"] / len(clips), 3
                ),
                "original: graph build + restore + warm-up (s)": round(original["load_s"], 2),
                "original: peak RSS (MiB)": round(tf_rss / mib, 1),
                "port/original speed (graph built once)": ratio(port_rate, graph_rate),
                "port/original speed (extractor per clip)": ratio(port_rate, api_rate),
                "port/original CPU time (graph built once)": ratio(
                    port["tag_cpu_s"], original["tag_cpu_s"]
                ),
                "port/original peak RSS": ratio(port_rss, tf_rss),
                "max |port - original| over clips x tags": float(
                    f"{max_difference(port['tags'], original['tags']):.2g}"
                ),
            }
        )
        summary += (
            f"; original (TF {original['tensorflow']}) {graph_rate:.1f} clips/s graph once, "
            f"{api_rate:.1f} via extractor(), peak RSS {tf_rss / mib:.0f} MiB"
        )
    return BenchResult("musicnn", summary, figures, notes=notes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clips", type=int, default=SIZES["full"].n_clips)
    parser.add_argument("--seconds", type=float, default=SIZES["full"].seconds)
    parser.add_argument("--tf-python", help=f"a Python with TensorFlow + musicnn ({TF_PYTHON_ENV})")
    parser.add_argument("--work", type=Path, default=Path("bench/out/musicnn_speed"))
    args = parser.parse_args()
    spec = DatasetSpec(1, args.clips, args.seconds, sample_rate=44100)
    args.work.mkdir(parents=True, exist_ok=True)
    result = run("full", args.work, tf=args.tf_python, spec=spec)
    print(result.line())
    for key, value in result.figures.items():
        print(f"- {key}: {value}")
    for note in result.notes:
        print(f"- note: {note}")


if __name__ == "__main__":
    main()
