"""`harness run` of one experiment timed in process: `Runner.run` alone, without the
interpreter's start-up and imports. Prints one JSON line: calls, errors, cache hits, wall
and CPU time (the process's, the fake server being another process).

    python -m bench.run_inproc EXPERIMENT.yaml --results-dir R --cache-dir C
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import time
from pathlib import Path

import yaml

from harness.calls.cache import ResponseCache
from harness.config.experiment import ExperimentConfig
from harness.runs.runner import Runner

# The SDK a provider imports lazily, by provider name.
SDK_OF = {"openai": "openai", "openai-compatible": "openai"}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.run_inproc", description=__doc__)
    parser.add_argument("experiment", type=Path)
    parser.add_argument("--results-dir", type=Path, required=True)
    parser.add_argument("--cache-dir", type=Path, required=True)
    args = parser.parse_args(argv)
    config = ExperimentConfig(**yaml.safe_load(args.experiment.read_text()))
    # Imports are left out on both sides: the floor imports the SDK before its clock starts,
    # the harness when its first client is built (inside `Runner.run`), so it is imported here.
    if config.provider.name in SDK_OF:
        importlib.import_module(SDK_OF[config.provider.name])
    cache = ResponseCache(args.cache_dir)
    try:
        runner = Runner(
            config, cache=cache, results_dir=args.results_dir, show_progress=False, overwrite=True
        )
        started, cpu = time.perf_counter(), time.process_time()
        result = asyncio.run(runner.run())
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    finally:
        cache.close()
    stats = result.stats
    summary = {
        "calls": stats.calls,
        "errors": stats.errors,
        "cache_hits": stats.cache_hits,
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
