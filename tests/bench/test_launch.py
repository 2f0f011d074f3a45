"""bench.launch: a child's peak RSS is its own, not the benchmark driver's (Linux keeps the
peak across exec, and a forked child starts from its parent's)."""

from __future__ import annotations

import sys

from bench.common import run_timed

MiB = 2**20


def test_a_child_of_a_large_driver_reports_its_own_peak() -> None:
    ballast = bytearray(400 * MiB)
    ballast[::4096] = b"\1" * len(ballast[::4096])  # resident, page by page
    small = run_timed([sys.executable, "-c", "pass"])
    large = run_timed(
        [sys.executable, "-c", "x = bytearray(150 * 2**20); x[::4096] = b'1' * len(x[::4096])"]
    )
    del ballast
    assert small.returncode == 0 and small.max_rss_bytes < 100 * MiB
    assert 150 * MiB < large.max_rss_bytes < 300 * MiB
    assert large.cpu_s > 0 and large.wall_s > 0


def test_the_exit_status_and_output_come_back() -> None:
    done = run_timed([sys.executable, "-c", "print('hello'); raise SystemExit(3)"])
    assert done.returncode == 3 and done.output.strip() == "hello"


TWO_HOLDERS = """
import os, time
child = os.fork()
x = bytearray(150 * 2**20); x[::4096] = b'1' * len(x[::4096])  # in each process, after the fork
time.sleep(0.6)
if child == 0:
    os._exit(0)
os.wait()
"""


def test_the_tree_figure_sums_a_forked_worker_and_its_parent() -> None:
    done = run_timed([sys.executable, "-c", TWO_HOLDERS], tree=True)
    alone = run_timed([sys.executable, "-c", "pass"])
    assert done.returncode == 0 and done.max_tree_pss_bytes is not None
    # each process holds 150 MiB of its own at the same time
    assert done.max_rss_bytes < 250 * MiB < 300 * MiB < done.max_tree_pss_bytes
    assert alone.max_tree_pss_bytes is None  # sampled only when asked
