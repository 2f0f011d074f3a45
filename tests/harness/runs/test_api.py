"""The public Python API: `harness.run`, `harness.evaluate`, `harness.load_run`, also from
inside a running event loop as in a Jupyter cell."""

from __future__ import annotations

import asyncio
import json
import tomllib
import warnings
from pathlib import Path

import pytest

import harness
from harness.core.errors import HarnessError
from harness.core.records import read_records
from harness.scoring.evaluation import CoverageWarning

ROOT = Path(__file__).resolve().parents[3]


def experiment(tmp_path: Path, dataset: Path) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(
        f"name: api\ndataset: {dataset}\nprovider: {{name: random, seed: 1}}\n"
        "inputs: {music: caption}\nrepeats: 2\nn_bootstrap: 50\n"
    )
    return path


def test_run_evaluate_and_load_run_agree(tmp_path: Path, tiny_dataset: Path) -> None:
    (result,) = harness.run(
        experiment(tmp_path, tiny_dataset),
        results_dir=tmp_path / "results",
        cache_dir=tmp_path / "cache",
        show_progress=False,
    )
    metrics = json.loads((result.out_dir / "metrics.json").read_text())
    assert result.aggregate.n_items == 3 and metrics["n_repeats"] == 2
    again = harness.evaluate(tiny_dataset, result.out_dir / "predictions.jsonl", n_bootstrap=50)
    assert again.to_json()["metrics"] == metrics["metrics"]
    frame = harness.load_run(result.out_dir)
    assert len(frame) == 6 and set(frame["repeat"]) == {0, 1}
    assert frame.attrs["metrics"]["n_items"] == 3 and frame.attrs["config"]["name"] == "api"
    records = list(read_records(result.out_dir / "records.jsonl"))
    assert list(frame["scores"]) == [r.scores for r in records]


def test_run_takes_overrides_and_validates_them(tmp_path: Path, tiny_dataset: Path) -> None:
    (result,) = harness.run(
        experiment(tmp_path, tiny_dataset),
        results_dir=tmp_path / "results",
        cache_dir=tmp_path / "cache",
        show_progress=False,
        limit=1,
        repeats=1,
    )
    assert result.aggregate.n_items == 1 and result.aggregate.n_repeats == 1
    with pytest.raises(HarnessError, match=r"limit=-1: limit: Input should be greater than 0"):
        harness.run(experiment(tmp_path, tiny_dataset), limit=-1)


def test_run_works_inside_a_running_event_loop(tmp_path: Path, tiny_dataset: Path) -> None:
    async def notebook_cell() -> float | None:
        (result,) = harness.run(
            experiment(tmp_path, tiny_dataset),
            results_dir=tmp_path / "results",
            cache_dir=tmp_path / "cache",
            show_progress=False,
        )
        return result.aggregate.metrics["mrr"].mean

    assert asyncio.run(notebook_cell()) is not None


def test_evaluate_takes_mappings_and_lines(tiny_dataset: Path) -> None:
    best_first = {f"d{i}": {f"c{i}_{j}": 4.0 - j for j in range(4)} for i in range(3)}
    perfect = harness.evaluate(tiny_dataset, best_first, n_bootstrap=20)
    assert perfect.metrics["hit@1"].mean == 1.0 and perfect.metrics["kendall_tau_b"].mean == 1.0
    lines = [{"item_id": k, "scores": v} for k, v in best_first.items()]
    assert harness.evaluate(tiny_dataset, lines, n_bootstrap=20).to_json() == perfect.to_json()
    with pytest.raises(HarnessError, match="item_id"):
        harness.evaluate(tiny_dataset, [{"scores": {}}])


def test_load_run_names_a_folder_that_is_not_a_run(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match=r"no records\.jsonl"):
        harness.load_run(tmp_path)


def test_version_matches_the_package_metadata() -> None:
    from importlib import metadata

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["dynamic"] == ["version"]  # read from harness/_version.py
    dynamic = pyproject["tool"]["setuptools"]["dynamic"]["version"]
    assert dynamic == {"attr": "harness._version.__version__"}
    assert harness.__version__ == metadata.version("bgm-judge")


def test_evaluate_takes_ranking_lines_and_cutoffs(tmp_path: Path) -> None:
    from tests.conftest import write_pool_dataset

    pool = write_pool_dataset(tmp_path / "pool", 2, 20)
    lines = [{"item_id": "q0", "ranking": ["s5", "s6", "s7"]}, {"item_id": "q1", "ranking": []}]
    result = harness.evaluate(pool, lines, at=[3], n_bootstrap=10)
    assert result.per_item["recall@3"][0] == 1.0
    assert result.per_item["recall@3"][1] == pytest.approx(3 / 20)  # all tied: chance


def sweep(tmp_path: Path, dataset: Path) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(
        f"name: grid\ndataset: {dataset}\nproviders: [{{name: random, seed: 1}}]\n"
        "inputs: [{music: caption}, {dialogue: summary, music: caption}]\nn_bootstrap: 50\n"
    )
    return path


def test_name_on_a_sweep_names_the_sweep_as_set_does(tmp_path: Path, tiny_dataset: Path) -> None:
    """`name=` renames the sweep (its runs keep their names), as `--set name=` does: not one
    name for every run, which made the second run collide with the first."""
    results = harness.run(
        sweep(tmp_path, tiny_dataset),
        results_dir=tmp_path / "results",
        cache_dir=tmp_path / "cache",
        show_progress=False,
        name="quick",
        limit=2,
    )
    assert [r.out_dir.relative_to(tmp_path / "results").as_posix() for r in results] == [
        "quick/random_default_full_caption",
        "quick/random_default_summary_caption",
    ]
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == ["quick"]
    assert all(r.aggregate.n_items == 2 for r in results)


def test_a_limited_run_under_its_own_name_leaves_the_full_run_alone(
    tmp_path: Path, tiny_dataset: Path
) -> None:
    """The README's example: a quick run of a few items after the full experiment."""
    common = {"results_dir": tmp_path / "r", "cache_dir": tmp_path / "c", "show_progress": False}
    (full, _) = harness.run(sweep(tmp_path, tiny_dataset), **common)
    before = (full.out_dir / "metrics.json").read_bytes()
    quick = harness.run(sweep(tmp_path, tiny_dataset), name="grid_first2", limit=2, **common)
    assert [r.aggregate.n_items for r in quick] == [2, 2]
    assert (full.out_dir / "metrics.json").read_bytes() == before


def test_evaluate_warns_when_predictions_leave_items_out(tiny_dataset: Path) -> None:
    """Predictions for one item of three: the figures average all three (the two missing at
    chance level), so the caller is told, not left to notice coverage 33%."""
    one = {"d0": {"c0_0": 3.0, "c0_1": 2.0, "c0_2": 1.0, "c0_3": 0.0}}
    with pytest.warns(CoverageWarning) as caught:
        aggregate = harness.evaluate(tiny_dataset, one, n_bootstrap=50)
    assert aggregate.n_items == 3 and aggregate.coverage == pytest.approx(1 / 3)
    assert [str(w.message) for w in caught] == [
        "no prediction for 2 of 3 items (d1, d2): counted with every candidate unscored, at "
        "chance level (missing: worst; --missing exclude leaves them out)",
        "coverage 33.3%: 66.7% of the candidates have no score",
    ]
    with pytest.warns(CoverageWarning) as caught:
        assert harness.evaluate(tiny_dataset, one, missing="exclude", n_bootstrap=50).n_items == 1
    assert str(caught[0].message).startswith("no prediction for 2 of 3 items (d1, d2): left out")
    assert caught[0].filename == __file__  # points at the caller's line


def test_evaluate_of_full_predictions_does_not_warn(tiny_dataset: Path) -> None:
    full = {f"d{i}": {f"c{i}_{j}": float(3 - j) for j in range(4)} for i in range(3)}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert harness.evaluate(tiny_dataset, full, n_bootstrap=50).coverage == 1.0
