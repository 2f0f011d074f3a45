"""Run one command as a child of this small, fresh process and write its wall time, exit
status, CPU time and peak RSS as one JSON object; with --tree, also the peak over samples
(every 50 ms) of the proportional set size (PSS) summed over the child and its descendants:
a command that forks a worker uses both processes' memory at once, and the kernel's peak RSS
of a process tree is the largest one's, not their sum (PSS shares pages both map).

Why a launcher: Linux keeps a process's peak RSS across exec, and a child made by fork or
vfork starts from its parent's address space, so a child of the benchmark driver (which grows
to hundreds of MiB writing datasets) reports at least the driver's peak as its own. This
process is fresh and small, so what its child reports is the child's.

    python -m bench.launch REPORT.json [--tree] -- COMMAND [ARG ...]
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

SAMPLE_EVERY_S = 0.05


def tree_pss_bytes(pid: int) -> int:
    """PSS of `pid` and its descendants now (0 for those gone meanwhile)."""
    total, stack = 0, [pid]
    while stack:
        process = stack.pop()
        try:
            with open(f"/proc/{process}/smaps_rollup") as rollup:
                for line in rollup:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) * 1024
                        break
            for task in os.listdir(f"/proc/{process}/task"):
                with open(f"/proc/{process}/task/{task}/children") as children:
                    stack.extend(int(child) for child in children.read().split())
        except (OSError, ValueError):
            continue
    return total


def _sample(pid: int, peak: list[int], done: threading.Event) -> None:
    while not done.wait(SAMPLE_EVERY_S):
        peak[0] = max(peak[0], tree_pss_bytes(pid))


def main(argv: list[str]) -> int:
    tree = len(argv) > 1 and argv[1] == "--tree"
    if tree:
        argv = [argv[0], *argv[2:]]
    if len(argv) < 3 or argv[1] != "--":
        print(__doc__, file=sys.stderr)
        return 2
    report, command = Path(argv[0]), argv[2:]
    started = time.perf_counter()
    pid = os.posix_spawnp(command[0], command, os.environ)
    peak, done = [0], threading.Event()
    if tree:
        threading.Thread(target=_sample, args=(pid, peak, done), daemon=True).start()
    _, status, usage = os.wait4(pid, 0)
    done.set()
    figures = {
        "wall_s": time.perf_counter() - started,
        "returncode": os.waitstatus_to_exitcode(status),
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "max_rss_bytes": usage.ru_maxrss * 1024,
        "max_tree_pss_bytes": peak[0] if tree else None,
    }
    report.write_text(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
