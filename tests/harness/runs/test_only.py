"""`--only` makes some runs of a sweep and leaves the sweep whole (issue 47, #2): its
sweep.json and comparison.md name every run of the experiment finished so far, not just the
runs selected this time."""

from __future__ import annotations

import json
from pathlib import Path

import harness
from harness.config.loading import load_experiments


def test_only_keeps_the_other_finished_runs_in_the_sweep(
    tmp_path: Path, tiny_dataset: Path
) -> None:
    path = tmp_path / "exp.yaml"
    path.write_text(
        f"name: sweep\ndataset: {tiny_dataset}\nn_bootstrap: 20\ninputs: {{music: caption}}\n"
        "providers:\n  - {name: random, seed: 1, label: r1}\n  - {name: random, seed: 2, label: r2}\n"
        "  - {name: random, seed: 3, label: r3}\n"
    )
    names = [config.name for config in load_experiments(path)]
    options = {"results_dir": tmp_path / "results", "cache_dir": tmp_path / "cache"}
    harness.run(path, only=[names[2]], show_progress=False, **options)
    harness.run(path, only=[names[0]], show_progress=False, **options)
    sweep = tmp_path / "results" / "sweep"
    assert json.loads((sweep / "sweep.json").read_text())["runs"] == names
    table = (sweep / "comparison.md").read_text()
    assert [name for name in names if f"| {name} |" in table] == [names[0], names[2]]
    assert table.index(names[0]) < table.index(names[2])  # in the experiment's order
