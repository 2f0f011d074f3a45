"""Where a command may fork a helper process to use a second core (`harness evaluate`'s
predictions reader, `harness report`'s figure drawer)."""

from __future__ import annotations

import multiprocessing
import os
import sys
from multiprocessing.context import ForkContext


def fork_context() -> ForkContext | None:
    """The fork start method, on Linux with two cores or more this process may use; None
    elsewhere: macOS has fork, but libraries it links (Accelerate, Objective-C) may crash in
    a forked child, and with one core a worker only competes with its parent."""
    if sys.platform != "linux" or len(os.sched_getaffinity(0)) < 2:
        return None
    return multiprocessing.get_context("fork")
