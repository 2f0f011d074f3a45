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
        "quick/random_uniform_full_caption",
        "quick/random_uniform_summary_caption",
    ]
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == ["quick"]
    assert all(r.aggregate.n_items == 2 for r in results)


def test_a_limited_run_under_its_own_name_leaves_the_full_run_alone(
    tmp_path: Path, tiny_dataset: Path
) -> None:
    """docs/python_api.md's example: a quick run of a few items after the full experiment."""
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


def test_import_harness_is_cheap_and_the_api_loads_on_first_use() -> None:
    """PEP 562: `import harness` imports none of the API's modules; `harness.run` is the API's
    very function (its signature and docstring), loaded when first asked for."""
    import subprocess
    import sys

    code = (
        "import sys, harness\n"
        "print(sorted(m for m in sys.modules if m.startswith(('harness.', 'pydantic', 'numpy'))))\n"
        "from harness.runs import api\n"
        "print(harness.run is api.run, harness.evaluate is api.evaluate, "
        "harness.load_run is api.load_run)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["['harness._version']", "True True True"]
    assert {"run", "evaluate", "load_run", "__version__"} <= set(dir(harness))
    assert harness.run.__doc__ and "see harness" not in harness.run.__doc__
    with pytest.raises(AttributeError, match="no attribute 'runn'"):
        harness.runn  # noqa: B018


def test_run_takes_a_shard_set_overrides_and_the_files_seed_cache(
    tmp_path: Path, tiny_dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What `harness run` takes, in Python: `--shard`, `--set`, and a seed cache (the file's
    `cache.seed` was ignored by `harness.run`)."""
    path = experiment(tmp_path, tiny_dataset)
    common = {"results_dir": tmp_path / "results", "show_progress": False}
    (first,) = harness.run(path, cache_dir=tmp_path / "seed", **common)
    (shard,) = harness.run(
        path, cache_dir=tmp_path / "c2", shard="1/2", set=["repeats=1"], **common
    )
    assert shard.out_dir.name == "api.shard-1-of-2" and shard.config.repeats == 1
    seeded = tmp_path / "seeded.yaml"
    seeded.write_text(path.read_text().replace("name: api", "name: s") + "cache: {seed: seed}\n")
    monkeypatch.chdir(tmp_path)  # a relative cache.seed is read from the current folder
    (again,) = harness.run(seeded, cache_dir=tmp_path / "c3", **common)
    assert again.stats.model_calls == 0 and again.stats.seeded == first.stats.calls


def test_evaluate_takes_trec_qrels_in_python_as_on_the_command_line(tmp_path: Path) -> None:
    from tests.harness.core.test_trec import write_trec

    run, qrels = write_trec(tmp_path)
    aggregate = harness.evaluate(None, run, qrels=qrels, at=[1], n_bootstrap=10)
    assert aggregate.metrics["mrr"].mean == pytest.approx((1 / 2 + 1) / 2)
    with pytest.raises(HarnessError, match="give --dataset DIR or --qrels FILE"):
        harness.evaluate(None, run)


def test_the_command_line_runs_through_the_python_api(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One pipeline: `harness run` (and `--dry-run`) hands its options to `harness.run`."""
    from typer.testing import CliRunner

    from harness.cli.main import app
    from harness.runs import api

    calls: list[dict[str, object]] = []

    def record(*args: object, **kwargs: object) -> list[object]:
        calls.append({"args": args, **kwargs})
        return []

    monkeypatch.setattr(api, "run", record)
    exp = tmp_path / "exp.yaml"
    args = ["run", str(exp), "--limit", "2", "--only", "r*", "--shard", "1/4", "--no-progress"]
    args += ["--set", "repeats=3", "--seed-cache", "seed", "--overwrite", "--cache-dir", "c"]
    assert CliRunner().invoke(app, args).exit_code == 0
    assert CliRunner().invoke(app, [*args, "--dry-run", "--output-tokens", "9"]).exit_code == 0
    given = {
        "args": (exp,),
        "results_dir": Path("results"),
        "cache_dir": Path("c"),
        "seed_cache": Path("seed"),
        "show_progress": False,
        "overwrite": True,
        "only": ["r*"],
        "shard": "1/4",
        "set": ["repeats=3"],
        "save_experiment": None,
        "limit": 2,
    }
    assert calls == [
        {**given, "dry_run": False, "output_tokens": None},
        {**given, "dry_run": True, "output_tokens": 9},
    ]


def test_harness_evaluate_runs_through_the_python_api(
    tmp_path: Path, tiny_dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from harness.cli.main import app
    from harness.runs import api

    given: list[dict[str, object]] = []
    evaluation = api.evaluation

    def record(*args: object, **kwargs: object) -> object:
        given.append({"args": args, **kwargs})
        return evaluation(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(api, "evaluation", record)
    preds = tmp_path / "p.jsonl"
    preds.write_text('{"item_id": "d0", "scores": {"c0_0": 1}}\n')
    args = ["evaluate", "--dataset", str(tiny_dataset), "--predictions", str(preds)]
    done = CliRunner().invoke(app, [*args, "--at", "1,2", "--n-bootstrap", "10"])
    assert done.exit_code == 0, done.output
    assert "warning: no prediction for 2 of 3 items" in " ".join(done.output.split())
    assert given == [
        {
            "args": (str(tiny_dataset), preds),
            "qrels": None,
            "columns": None,
            "check_audio": False,
            "missing": "worst",
            "n_bootstrap": 10,
            "seed": 0,
            "at": (1, 2),
            "protocol": "rank",
            "options": {},
        }
    ]


def test_a_dry_run_in_python_calls_nothing_and_makes_no_run(
    tmp_path: Path, tiny_dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results"
    path = experiment(tmp_path, tiny_dataset)
    assert harness.run(path, results_dir=results, cache_dir=tmp_path / "c", dry_run=True) == []
    assert "api" in capsys.readouterr().out  # the estimate's table names the run
    assert not (results / "api").exists()  # no run folder: nothing was called
