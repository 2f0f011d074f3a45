"""`python -m bench [NAME ...] [--tiny] [--results FILE] [--against TREE]`: run the benchmarks, print one
summary line each, and write their figures with the machine and date: to bench/RESULTS.md
when every benchmark runs at full size, else to bench/out/ unless `--results` names a file.
Writing over an earlier results file keeps the sections of the benchmarks not run this time
and flags every tracked ratio more than 10% worse than before (`bench.results`)."""

from __future__ import annotations

import argparse
import importlib
import platform
import sys
import time
import traceback
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path

import psutil

from bench import side_by_side, yardstick
from bench.common import OUT, REPO, BenchResult, Size, fresh
from bench.results import write_results

BENCHMARKS: dict[str, tuple[str, str]] = {
    "throughput": (
        "bench.throughput",
        "(1) 4,800 calls at 200 ms, concurrency 64, vs the bare SDK",
    ),
    "latency": ("bench.latency_bound", "(1b) 960 calls at 1 s, concurrency 32"),
    "ceiling": (
        "bench.ceiling",
        "(1c) the 4,800 calls at latency 0: CPU per call and wall vs the bare SDK",
    ),
    "rate_limit": (
        "bench.rate_limit",
        "(2) requests and tokens limits: no rpm (the headers' pace) vs rpm set to the binding rate",
    ),
    "replay": ("bench.replay", "(3) warm-cache replay of a 50,000-call run, whole process"),
    "metrics": ("bench.metrics_speed", "(4) metrics + bootstrap + agreement matrix"),
    "memory": ("bench.memory", "(5) peak RSS, 4,800 calls over 1,000 10-second clips"),
    "memory_series": (
        "bench.memory_series",
        "(5b) peak RSS of 1k / 10k / 100k calls of the random scorer (100k three times); its warm re-run",
    ),
    "memory_million": (
        "bench.memory_million",
        "(5c) a 1,000,000-call run of the random scorer: completes, peak RSS, once",
    ),
    "inspect": ("bench.vs_inspect", "(6) the 4,800-call workload through inspect_ai and bgm-judge"),
    "musicnn": ("bench.musicnn_speed", "(7) musicnn tags/s on CPU, port vs TensorFlow"),
    "batch_cost": (
        "bench.batch_cost",
        "(8) cost of 1,200 items x 4 online, with prefix caching and in batches; batch round trip",
    ),
    "sequential": (
        "bench.sequential",
        "(9) sequential comparison, 2,000 synthetic items, 100 seeds: power and false decisions",
    ),
    "pool": (
        "bench.pool",
        "(10) a pool of 1-8 servers (at most 4 requests each, 1 s or more) vs the ideal; the "
        "coordinator's ceiling; a server killed mid-run; a slow server",
    ),
    "startup": (
        "bench.startup",
        "(11) start-up: harness --help, harness run --help, a 1-item run, vs the bare interpreter",
    ),
    "report_scale": (
        "bench.report_scale",
        "(12) report.html of 2 runs x 200 items x 500 candidates (rank, refine) in Chromium; "
        "a 20-run report, whole process",
    ),
    "report_many": (
        "bench.report_many",
        "(12b) the 20-run report of report_scale alone, whole process",
    ),
    "evaluate_pool": (
        "bench.evaluate_pool",
        "(13) harness evaluate of 10,000 items x 500 candidates vs pytrec_eval, whole process",
    ),
    "real_judge": (
        "bench.real_judge",
        "(14) the packaged SmolLM2-135M GGUF judge on CPU: load, time per call, a sweep's next load",
    ),
}


def run_one(name: str, size: Size) -> BenchResult:
    module = importlib.import_module(BENCHMARKS[name][0])
    work = fresh(OUT / f"{name}_{size}")
    result: BenchResult = module.run(size, work)
    return result


def machine() -> list[str]:
    cpu = platform.processor() or platform.machine()
    model = (
        next(
            (
                line.split(":", 1)[1].strip()
                for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")
            ),
            cpu,
        )
        if Path("/proc/cpuinfo").is_file()
        else cpu
    )
    libraries = ", ".join(
        f"{lib} {version(lib)}" for lib in ("openai", "httpx", "inspect_ai", "numpy")
    )
    return [
        f"- date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        f"- machine: {model}, {psutil.cpu_count(logical=True)} logical CPUs, "
        f"{psutil.virtual_memory().total / 2**30:.0f} GiB RAM, {platform.system()} {platform.release()}",
        f"- load average when started: {', '.join(f'{x:.2f}' for x in psutil.getloadavg())}",
        f"- python {platform.python_version()}; {libraries}",
        f"- yardstick (`bench.yardstick`, a fixed CPU workload; lower is faster) at the start: "
        f"{yardstick.measure():.3f} s",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "names", nargs="*", metavar="NAME", help=f"default: all of {', '.join(BENCHMARKS)}"
    )
    parser.add_argument("--tiny", action="store_true", help="tiny sizes (a smoke test)")
    parser.add_argument("--results", type=Path, help="where to write the results markdown")
    parser.add_argument(
        "--against",
        type=Path,
        metavar="TREE",
        help="run each benchmark in this checkout and in TREE (another checkout with its own "
        ".venv), alternately, and write their shared figures side by side",
    )
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(BENCHMARKS))
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; known: {', '.join(BENCHMARKS)}")
    names = [name for name in BENCHMARKS if name in args.names] if args.names else list(BENCHMARKS)
    size: Size = "tiny" if args.tiny else "full"
    everything = size == "full" and names == list(BENCHMARKS)
    default = REPO / "bench" / "RESULTS.md" if everything else OUT / f"RESULTS-{size}.md"
    out_path: Path = args.results or default
    OUT.mkdir(parents=True, exist_ok=True)
    header = machine()
    if args.against is not None:
        rows = side_by_side.compare(names, args.against.resolve(), size)
        header.append(f"- yardstick at the end: {yardstick.measure():.3f} s")
        side_by_side.write_section(out_path, header, args.against.resolve(), rows)
        print(f"results written to {out_path}")
        return 0
    results: list[BenchResult] = []
    failed = False
    for name in names:
        started = time.perf_counter()
        try:
            result = run_one(name, size)
        except Exception:
            traceback.print_exc()
            result = BenchResult(
                name, "failed: see the traceback printed by the run", {}, met=False
            )
            failed = True
        result.figures["benchmark wall (s)"] = round(time.perf_counter() - started, 1)
        results.append(result)
        print(result.line(), flush=True)
    header.append(f"- yardstick at the end: {yardstick.measure():.3f} s")
    command = " ".join(["python -m bench", *(argv if argv is not None else sys.argv[1:])])
    write_results(
        out_path, results, header, command, lambda name: BENCHMARKS[name][1], list(BENCHMARKS)
    )
    print(f"results written to {out_path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
