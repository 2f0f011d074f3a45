"""A report's figures drawn by a forked worker: the same files, byte for byte, as drawn in
this process, whether the worker draws them or dies first."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from harness.core.workers import fork_context
from harness.reports.analysis import Analysis, analyse
from harness.reports.figure_worker import FigureWorker
from harness.reports.plots import Figure
from harness.reports.writing import FigureInputs, figure_inputs, write_report
from tests.conftest import load_runs, write_tiny_dataset
from tests.harness.reports._runs import pointwise_records, tiny_scores, write_run

pytestmark = pytest.mark.skipif(
    fork_context() is None, reason="the worker forks only on Linux with two cores"
)


@pytest.fixture
def analysis(tmp_path: Path) -> Analysis:
    dataset = write_tiny_dataset(tmp_path / "data", n_items=6)
    sweep = tmp_path / "results"
    write_run(sweep / "agrees", dataset, pointwise_records(tiny_scores(6)))
    write_run(sweep / "reverses", dataset, pointwise_records(tiny_scores(6, reverse=True)))
    return analyse(load_runs([sweep / "agrees", sweep / "reverses"]))


def _files(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


def test_the_worker_draws_what_this_process_draws(analysis: Analysis, tmp_path: Path) -> None:
    here = write_report(analysis, tmp_path / "here", title="t")
    with FigureWorker() as drawer:
        assert drawer.started
        there = write_report(analysis, tmp_path / "there", title="t", drawer=drawer)
        assert not drawer.fell_back
    assert [p.name for p in there] == [p.name for p in here]  # the same files, same order
    assert {"metrics.png", "metrics.pdf", "agreement.png", "report.html"} <= {p.name for p in here}
    assert _files(tmp_path / "there") == _files(tmp_path / "here")
    assert b"bgm-judge-figure-" not in (tmp_path / "there" / "report.html").read_bytes()


@pytest.mark.parametrize("when", ["before the inputs", "after the inputs"])
def test_a_worker_that_dies_leaves_the_drawing_to_this_process(
    analysis: Analysis, tmp_path: Path, when: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = write_report(analysis, tmp_path / "here", title="t")
    with FigureWorker() as drawer:
        assert drawer.worker_pid is not None
        if when == "before the inputs":
            os.kill(drawer.worker_pid, signal.SIGKILL)
        else:
            draw = drawer.draw

            def draw_then_die(inputs: object) -> None:
                draw(inputs)  # type: ignore[arg-type]
                assert drawer.worker_pid is not None
                os.kill(drawer.worker_pid, signal.SIGKILL)

            monkeypatch.setattr(drawer, "draw", draw_then_die)
        there = write_report(analysis, tmp_path / "there", title="t", drawer=drawer)
        assert drawer.fell_back
    assert [p.name for p in there] == [p.name for p in here]
    assert _files(tmp_path / "there") == _files(tmp_path / "here")


def test_the_worker_is_gone_after_the_block() -> None:
    with FigureWorker() as drawer:
        pid = drawer.worker_pid
    assert pid is not None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def _drawn_by(log: Path, monkeypatch: pytest.MonkeyPatch, *, dies_on: str = "") -> None:
    """Make every process that draws write `pid name...` to `log`; the worker's helper (the
    test's grandchild), if it is to draw `dies_on`, exits at once instead, as if killed."""
    from harness.reports.writing import draw_figures as draw

    def logged(inputs: FigureInputs, **options: Any) -> dict[str, Figure]:
        names = options.get("names") or inputs.names
        if dies_on in names and test_pid not in (os.getpid(), os.getppid()):
            os._exit(9)
        with log.open("a") as file:
            file.write(f"{os.getpid()} {' '.join(names)}\n")
        return draw(inputs, **options)

    test_pid = os.getpid()
    monkeypatch.setattr("harness.reports.figure_worker.draw_figures", logged)


def test_the_worker_shares_the_figures_with_a_helper_it_forks(
    analysis: Analysis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_report(analysis, tmp_path / "here", title="t")
    log = tmp_path / "drawn"
    _drawn_by(log, monkeypatch)
    with FigureWorker() as drawer:
        write_report(analysis, tmp_path / "there", title="t", drawer=drawer)
        assert not drawer.fell_back
    drawn = [line.split() for line in log.read_text().splitlines()]
    pids = {pid for pid, *_ in drawn}
    assert len(pids) == 2 and str(os.getpid()) not in pids  # two processes, neither this one
    assert sorted(name for _, *names in drawn for name in names) == ["agreement", "metrics"]
    assert _files(tmp_path / "there") == _files(tmp_path / "here")


def test_a_helper_that_dies_leaves_its_share_to_the_worker(
    analysis: Analysis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_report(analysis, tmp_path / "here", title="t")
    log = tmp_path / "drawn"
    _drawn_by(log, monkeypatch, dies_on="agreement")
    with FigureWorker() as drawer:
        write_report(analysis, tmp_path / "there", title="t", drawer=drawer)
        assert not drawer.fell_back
        worker = str(drawer.worker_pid)
    drawn = [line.split() for line in log.read_text().splitlines()]
    assert drawn == [[worker, "metrics"], [worker, "agreement"]]
    assert _files(tmp_path / "there") == _files(tmp_path / "here")


def _running(pid: int) -> bool:
    """Whether `pid` is a process that has not ended (a zombie has)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_helper_whose_worker_is_killed_ends_too(
    analysis: Analysis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.reports.writing import draw_figures as draw

    log = tmp_path / "drawn"
    test_pid = os.getpid()

    def slow(inputs: FigureInputs, **options: Any) -> dict[str, Figure]:
        with log.open("a") as file:
            file.write(f"{os.getpid()} {os.getppid()}\n")
        if os.getppid() == test_pid:  # the worker: killed while it draws
            time.sleep(60)
        elif os.getpid() != test_pid:  # its helper: still drawing when the worker is killed
            time.sleep(1)
        return draw(inputs, **options)

    monkeypatch.setattr("harness.reports.figure_worker.draw_figures", slow)
    inputs = figure_inputs(analysis)
    with FigureWorker() as drawer:
        drawer.draw(inputs)
        deadline = time.monotonic() + 30
        while len(_lines(log)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        (helper,) = [int(pid) for pid, parent in _lines(log) if int(parent) != test_pid]
        assert drawer.worker_pid is not None
        os.kill(drawer.worker_pid, signal.SIGKILL)
        assert set(drawer.figures(inputs)) == {"metrics", "agreement"}  # drawn here
        assert drawer.fell_back
    deadline = time.monotonic() + 30
    while _running(helper) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(helper)


def _lines(log: Path) -> list[list[str]]:
    return [line.split() for line in log.read_text().splitlines()] if log.exists() else []
