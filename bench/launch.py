"""Run one command as a child of this small, fresh process and write its wall time, exit
status, CPU time and peak RSS as one JSON object.

Why a launcher: Linux keeps a process's peak RSS across exec, and a child made by fork or
vfork starts from its parent's address space, so a child of the benchmark driver (which grows
to hundreds of MiB writing datasets) reports at least the driver's peak as its own. This
process is fresh and small, so what its child reports is the child's.

    python -m bench.launch REPORT.json -- COMMAND [ARG ...]
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print(__doc__, file=sys.stderr)
        return 2
    report, command = Path(argv[0]), argv[2:]
    started = time.perf_counter()
    pid = os.posix_spawnp(command[0], command, os.environ)
    _, status, usage = os.wait4(pid, 0)
    figures = {
        "wall_s": time.perf_counter() - started,
        "returncode": os.waitstatus_to_exitcode(status),
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "max_rss_bytes": usage.ru_maxrss * 1024,
    }
    report.write_text(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
