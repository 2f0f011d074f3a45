"""Pairs (dialogue, clip) scored per second by a local model, through the real runner, on
whatever device is present.

    python -m bench.local_throughput --provider qwen-omni --model Qwen/Qwen2.5-Omni-7B \
        --batch-size 8 --pairs 256
    python -m bench.local_throughput --provider clap --model tiny     # no weights needed

`--model tiny` builds a tiny random checkpoint of the family (tests/support/tiny_models.py), which
measures the harness and batching overhead, not a real model. The dataset is synthetic:
pairs/4 dialogues with 4 distinct tone clips each of `--clip-seconds` (DialBGM clips are
10 s). The model is loaded before the clock starts; the load time is printed apart.
Prints one summary line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import soundfile

from harness.calls.cache import ResponseCache
from harness.config.experiment import ExperimentConfig
from harness.config.experiment import provider_config as validated_provider
from harness.runs.runner import Runner
from providers import create_provider
from tests.support.tiny_models import BUILDERS

WORDS = [
    "rain",
    "coffee",
    "exam",
    "party",
    "quiet",
    "late",
    "train",
    "birthday",
    "garden",
    "hospital",
    "walk",
    "dinner",
]


def write_dataset(root: Path, items: int, seconds: float) -> Path:
    """items x 4 clips of distinct tones, dialogues of a few varied turns."""
    rate = 16000
    t = np.arange(int(rate * seconds)) / rate
    (root / "audio").mkdir(parents=True)
    clips, rows = [], []
    rng = np.random.default_rng(0)
    for i in range(items):
        ids = []
        for j in range(4):
            cid = f"c{i}_{j}"
            tone = 0.2 * np.sin(2 * np.pi * (180.0 + 37.0 * (4 * i + j)) * t)
            soundfile.write(root / "audio" / f"{cid}.wav", tone, rate)
            clips.append({"id": cid, "audio": f"audio/{cid}.wav", "caption": f"tone {cid}"})
            ids.append(cid)
        turns = [
            {"speaker": "AB"[k % 2], "text": " ".join(rng.choice(WORDS, size=12))} for k in range(6)
        ]
        rows.append(
            {
                "id": f"d{i}",
                "dialogue": turns,
                "summary": " ".join(rng.choice(WORDS, size=10)),
                "candidates": ids,
                "human_ranking": ids,
            }
        )
    (root / "clips.jsonl").write_text("".join(json.dumps(c) + "\n" for c in clips))
    (root / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--provider", choices=sorted(BUILDERS), default="qwen-omni")
    parser.add_argument("--model", default="tiny", help="hub id, local dir, or 'tiny'")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--pairs", type=int, default=32, help="rounded up to a multiple of 4")
    parser.add_argument("--clip-seconds", type=float, default=10.0)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--expected-score", action="store_true")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model = args.model
        if model == "tiny":
            model = str(BUILDERS[args.provider](work / "tiny"))
        items = -(-args.pairs // 4)
        dataset = write_dataset(work / "data", items, args.clip_seconds)
        provider_config = validated_provider(
            args.provider,
            model=model,
            batch_size=args.batch_size,
            max_concurrency=2 * args.batch_size,
            max_tokens=args.max_tokens,
            dtype=args.dtype,
            device=args.device,
            expected_score=args.expected_score,
            reask=0,
            timeout_s=3600,
        )
        config = ExperimentConfig(
            name="local_throughput", dataset=dataset, provider=provider_config
        )
        provider = create_provider(provider_config)
        started = time.perf_counter()
        provider.load()  # type: ignore[attr-defined]
        load_s = time.perf_counter() - started
        runner = Runner(
            config,
            cache=ResponseCache(work / "cache"),
            results_dir=work / "results",
            provider=provider,
            show_progress=False,
        )
        started = time.perf_counter()
        result = asyncio.run(runner.run())
        elapsed = time.perf_counter() - started
        pairs = items * 4
        settings = provider.settings  # type: ignore[attr-defined]
        batches = provider.batcher.batch_sizes  # type: ignore[attr-defined]
        print(
            f"local_throughput {args.provider} model={args.model} batch={args.batch_size} "
            f"device={settings.resolved_device()} dtype={settings.resolved_dtype()} "
            f"clip={args.clip_seconds:g}s: {pairs} pairs in {elapsed:.2f} s = "
            f"{pairs / elapsed:.2f} pairs/s (load {load_s:.1f} s; {len(batches)} batches, "
            f"mean size {np.mean(batches):.1f}; errors {result.stats.errors})"
        )


if __name__ == "__main__":
    main()
