"""A run's progress bar draws its counts at most every `every` seconds, and all of them when
asked (`show`, at the end of a run)."""

from __future__ import annotations

import io

from rich.console import Console

from harness.core.console import RunProgress


def test_the_bar_is_drawn_at_most_every_so_often_and_whole_at_the_end() -> None:
    console = Console(file=io.StringIO(), force_terminal=True)
    with RunProgress("replay", console, show=True, every=3600.0) as progress:
        progress.total(5)
        for n in range(5):
            progress.done(hits=n + 1, failed=0, bad=0)
        (task,) = progress._bar.tasks
        assert task.completed == 1 and task.fields["hits"] == 1  # the first call only
        progress.show(hits=5, failed=0, bad=1)
        assert task.completed == 5 and task.total == 5
        assert (task.fields["hits"], task.fields["bad"]) == (5, 1)
    with RunProgress("replay", console, show=True, every=0.0) as progress:
        for n in range(3):
            progress.done(hits=n, failed=n, bad=0)
        (task,) = progress._bar.tasks
        assert task.completed == 3 and task.fields["failed"] == 2  # each call drawn
