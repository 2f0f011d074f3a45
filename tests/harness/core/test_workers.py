"""Where a command forks a helper: Linux with two cores or more, nowhere else; and where it
does not, the command does the helper's work itself."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.core import workers
from harness.core.items import Item
from harness.core.predictions import read_predictions
from harness.reports.figure_worker import FigureWorker
from harness.runs.predictions_ahead import PredictionsReadAhead


def test_one_core_or_another_system_gets_no_fork(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workers.os, "sched_getaffinity", lambda pid: {0})
    assert workers.fork_context() is None
    monkeypatch.setattr(workers.os, "sched_getaffinity", lambda pid: {0, 1})
    assert workers.fork_context() is not None or sys.platform != "linux"
    monkeypatch.setattr(workers.sys, "platform", "darwin")
    assert workers.fork_context() is None


def test_without_a_fork_the_command_does_the_work(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(workers.sys, "platform", "darwin")
    items = [Item(id="d1", query="rain", candidates=("a", "b"), relevant=("a",))]
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"item_id": "d1", "scores": {"a": 1, "b": 2}}) + "\n")
    with PredictionsReadAhead(path, min_bytes=0) as ahead:
        assert not ahead.started
        got = ahead.read(items)
        assert not ahead.fell_back
    assert dict(got[0]["d1"]) == dict(read_predictions(path, items)[0]["d1"])
    with FigureWorker() as drawer:
        assert not drawer.started and drawer.worker_pid is None


ORPHAN = """
import json, os, signal, sys
from pathlib import Path
from harness.core.items import Item
from harness.runs.predictions_ahead import PredictionsReadAhead
from harness.reports.figure_worker import FigureWorker

path = Path(sys.argv[1])
candidates = [f"c{j}" for j in range(50)]
with path.open("w") as out:  # scores past any pipe's buffer: the worker blocks sending them
    for i in range(2000):
        out.write(json.dumps({"item_id": f"d{i}", "scores": dict.fromkeys(candidates, 0.5)}) + "\\n")
with PredictionsReadAhead(path, min_bytes=0) as ahead, FigureWorker() as drawer:
    print(ahead.worker_pid, drawer.worker_pid, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # no clean-up of any kind, as after SIGTERM
"""


@pytest.mark.skipif(workers.fork_context() is None, reason="forks only on Linux, two cores")
def test_a_worker_whose_parent_dies_ends_too(tmp_path: Path) -> None:
    """A worker must see its parent's end of the pipe close, and so must not hold a copy."""
    import os
    import subprocess
    import time

    said = tmp_path / "pids.txt"  # a file, not a pipe: a worker left behind would hold a pipe open
    with said.open("w") as out:
        child = subprocess.Popen(
            [sys.executable, "-c", ORPHAN, str(tmp_path / "p.jsonl")], stdout=out
        )
        assert child.wait(timeout=60) == -9
    pids = [int(pid) for pid in said.read_text().split()]
    assert len(pids) == 2
    deadline = time.monotonic() + 20
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [pid for pid in pids if _alive(pid)]
    for pid in left:
        os.kill(pid, 9)
    assert not left, "a worker outlived its parent"


def _alive(pid: int) -> bool:
    """Running (a zombie has exited: only its parent, here init, has yet to reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _wait_for_the_parent(connection: Any) -> None:
    connection.send("ready")
    connection.recv()


@pytest.mark.skipif(workers.fork_context() is None, reason="forks only on Linux, two cores")
def test_a_signal_sent_to_the_worker_alone_ends_it_and_not_its_parent() -> None:
    """The worker copies its parent's handlers (SIGTERM as Ctrl-C, while a run is under
    way): a SIGTERM sent to it alone must end the worker, not interrupt the parent."""
    import os
    import signal
    import time

    from harness.cli.common import interrupted_by, termination_as_interrupt

    with termination_as_interrupt(), workers.ForkedWorker() as worker:
        worker.start(_wait_for_the_parent)
        assert worker.receive() == "ready" and worker.worker_pid is not None
        os.kill(worker.worker_pid, signal.SIGTERM)
        assert worker.receive() is None  # it ended without a word
        time.sleep(0.2)  # a handler run here would have raised KeyboardInterrupt by now
        assert worker._process is not None
        worker._process.join(10)
        assert worker._process.exitcode == -signal.SIGTERM
    assert interrupted_by() == signal.SIGINT  # (the default: no signal was received here)


def test_no_fork_from_a_thread_other_than_the_main_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run inside a notebook's event loop runs in a thread of its own (`harness.core.event_loop`),
    beside threads that may hold a lock (SQLite's, for IPython's history) that a forked child
    would then wait on forever: it renders and reads in its own process instead."""
    import threading

    monkeypatch.setattr(workers.os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(workers.sys, "platform", "linux")
    seen: list[object] = []
    thread = threading.Thread(target=lambda: seen.append(workers.fork_context()))
    thread.start()
    thread.join()
    assert seen == [None]
    assert workers.fork_context() is not None  # the main thread may
