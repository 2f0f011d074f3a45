"""SIGTERM and SIGHUP (a `kill`, a closed terminal, a scheduler ending a job) end a run like
Ctrl-C: one line saying how to resume, exit code 128 + the signal's number, no traceback,
and the next run resumes paying at most for the requests that were in flight."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness.fake_api import FakeServer
from tests.reliability.conftest import (
    MakeDataset,
    answered_per_body,
    fast_settings,
    harness_command,
    paid_twice,
    wait_until,
    write_experiment,
)

N_ITEMS = 30
CONCURRENCY = 4
# Slow enough that the ~100 calls left after the 20th answer take seconds: on a loaded
# machine the signal is sent late, and a run that had already finished would prove nothing.
SLOW_S = 0.25


@pytest.mark.parametrize("sent", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_termination_signal_stops_cleanly_and_the_next_run_resumes(
    sent: signal.Signals, make_dataset: MakeDataset, tmp_path: Path
) -> None:
    dataset = make_dataset(n_items=N_ITEMS, n_clips=16)
    env = {**os.environ, "BGM_JUDGE_CACHE": str(tmp_path / "cache")}
    results = tmp_path / "results"
    with FakeServer(fast_settings(latency_s=SLOW_S)) as server:
        experiment = write_experiment(
            tmp_path / "exp.yaml", dataset, server, max_concurrency=CONCURRENCY
        )
        command = [*harness_command("run", str(experiment), "--results-dir", str(results)),
                   "--no-progress"]  # fmt: skip
        process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
        wait_until(lambda: sum(answered_per_body(server).values()) >= 20)
        process.send_signal(sent)
        _, err = process.communicate(timeout=60)
        paid = sum(answered_per_body(server).values())
        resumed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        twice = paid_twice(server)
        total = sum(answered_per_body(server).values())
    assert process.returncode == 128 + sent, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert f"interrupted ({sent.name})" in lines[0] and "re-run the same command" in lines[0]
    assert (results / "soak" / "records.partial.jsonl").exists() or resumed.returncode == 0
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming soak: an interrupted run left" in resumed.stderr
    assert paid >= 20 and twice <= CONCURRENCY and total - twice == 4 * N_ITEMS


INTERRUPTED_WHILE = """
import builtins, os, signal, sys
import typer.main

# As from a terminal: a pytest worker that ignores SIGINT would hand its children the ignore.
signal.signal(signal.SIGINT, signal.default_int_handler)

def interrupt():
    os.kill(os.getpid(), signal.SIGINT)

real_import, real_command = builtins.__import__, typer.main.get_command

def importing(name, *args, **kwargs):
    if name == {module!r}:
        interrupt()
    return real_import(name, *args, **kwargs)

def building(*args, **kwargs):
    interrupt()
    return real_command(*args, **kwargs)

if {module!r}:
    builtins.__import__ = importing
else:
    typer.main.get_command = building
sys.argv = {argv!r}
from harness.cli import main
main()
"""


RUNS = ["harness", "runs", "."]
RUN = ["harness", "run", "exp.yaml"]


@pytest.mark.parametrize(("module", "argv"), [
    ("rich.console", RUNS), ("harness.cli.common", RUNS), ("", RUNS),
    # the repeat of issue 48's attacks: inside a command, before its run starts, typer turned
    # Ctrl-C into exit 130 without a word (at 1.2 s and 2 s into `harness run`)
    ("harness.config.overrides", RUN),
], ids=["importing_rich", "importing_the_commands", "building_the_commands",
        "a_command_importing_its_pipeline"])  # fmt: skip
def test_ctrl_c_while_the_command_line_loads_is_one_line(
    module: str, argv: list[str], tmp_path: Path
) -> None:
    """Issue 48: Ctrl-C in a command's first seconds (its imports, typer building the
    commands) printed a KeyboardInterrupt traceback."""
    code = INTERRUPTED_WHILE.format(module=module, argv=argv)
    (tmp_path / "exp.yaml").write_text("name: x\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 130 and done.stderr.strip() == "interrupted", done.stderr
