"""The `harness` CLI: evaluate against an independent computation, run, list."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import soundfile
import yaml
from typer.testing import CliRunner

from harness.cli.main import app

runner = CliRunner()


def independent_metrics(scores: dict[str, float | None], ranking: list[str]) -> dict[str, float]:
    """Straight from the definitions of docs/metrics.md, one item at a time, no shared code."""
    n = len(ranking)
    rel = {cid: n - 1 - pos for pos, cid in enumerate(ranking)}
    value = {c: (-math.inf if s is None else s) for c, s in scores.items()}
    first = ranking[0]
    top = max(value.values())
    top_group = [c for c in value if value[c] == top]
    hit = 1 / len(top_group) if first in top_group else 0.0
    p = 1 + sum(v > value[first] for v in value.values())
    g = sum(v == value[first] for v in value.values())
    mrr = sum(1 / r for r in range(p, p + g)) / g
    dcg = 0.0
    for c in value:
        pc = 1 + sum(v > value[c] for v in value.values())
        group = [d for d in value if value[d] == value[c]]
        mean_gain = sum(rel[d] for d in group) / len(group)
        dcg += (
            mean_gain * sum(1 / math.log2(r + 1) for r in range(pc, pc + len(group))) / len(group)
        )
    ideal = sum(r / math.log2(i + 2) for i, r in enumerate(sorted(rel.values(), reverse=True)))
    conc = disc = ties_s = 0
    cands = list(value)
    for i in range(n):
        for j in range(i + 1, n):
            a, b = cands[i], cands[j]
            ds = (value[a] > value[b]) - (value[a] < value[b])
            dr = (rel[a] > rel[b]) - (rel[a] < rel[b])
            if ds == 0:
                ties_s += 1
            elif ds == dr:
                conc += 1
            else:
                disc += 1
    pairs = n * (n - 1) / 2
    denominator = math.sqrt((pairs - ties_s) * pairs)
    tau = (conc - disc) / denominator if denominator else 0.0
    return {"hit@1": hit, "mrr": mrr, "ndcg": dcg / ideal, "kendall_tau_b": tau}


def test_evaluate_matches_the_definitions(tiny_dataset: Path, tmp_path: Path) -> None:
    items = [json.loads(line) for line in (tiny_dataset / "items.jsonl").read_text().splitlines()]
    predictions = [
        {"item_id": "d0", "scores": {"c0_0": 7.0, "c0_1": 7.0, "c0_2": 2.0, "c0_3": None}},
        {"item_id": "d1", "scores": {"c1_0": None, "c1_1": 3.0, "c1_2": 3.0, "c1_3": 3.0}},
        {"item_id": "d2", "scores": {"c2_0": 1.0, "c2_1": 9.5, "c2_2": None, "c2_3": None}},
    ]
    pred_file = tmp_path / "preds.jsonl"
    pred_file.write_text("".join(json.dumps(p) + "\n" for p in predictions))
    out = tmp_path / "metrics.json"
    result = runner.invoke(
        app,
        [
            "evaluate",
            "--dataset",
            str(tiny_dataset),
            "--predictions",
            str(pred_file),
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    metrics = json.loads(out.read_text())
    expected = [
        independent_metrics(p["scores"], it["human_ranking"])
        for p, it in zip(predictions, items, strict=True)
    ]
    for name in ("hit@1", "mrr", "ndcg", "kendall_tau_b"):
        mean = sum(e[name] for e in expected) / 3
        assert metrics["metrics"][name]["mean"] == round(mean, 6), name
    assert metrics["coverage"] == round(8 / 12, 6)
    assert metrics["tie_rate"] == round(2 / 3, 6)
    assert "Hit@1" in result.output

    excluded = runner.invoke(
        app,
        [
            "evaluate",
            "--dataset",
            str(tiny_dataset),
            "--predictions",
            str(pred_file),
            "--missing",
            "exclude",
            "--out",
            str(out),
        ],
    )
    assert excluded.exit_code == 0
    assert json.loads(out.read_text())["n_items"] == 0


def test_evaluate_reports_a_bad_line(tiny_dataset: Path, tmp_path: Path) -> None:
    pred_file = tmp_path / "preds.jsonl"
    pred_file.write_text(
        '{"item_id": "d0", "scores": {"c0_0": 1}}\n{"item_id": "dx", "scores": {}}\n'
    )
    result = runner.invoke(
        app, ["evaluate", "--dataset", str(tiny_dataset), "--predictions", str(pred_file)]
    )
    assert result.exit_code == 2
    assert f"{pred_file}:2: unknown item id 'dx'" in " ".join(result.output.split())


def test_evaluate_warns_about_an_item_without_predictions(
    tiny_dataset: Path, tmp_path: Path
) -> None:
    pred_file = tmp_path / "preds.jsonl"
    lines = [
        json.dumps({"item_id": f"d{i}", "scores": {f"c{i}_{j}": 3.0 - j for j in range(4)}})
        for i in (0, 2)
    ]
    pred_file.write_text("\n".join(lines) + "\n")
    args = ["evaluate", "--dataset", str(tiny_dataset), "--predictions", str(pred_file)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert " ".join(result.stderr.split()) == (
        "warning: no prediction for 1 of 3 items (d1): counted with every candidate unscored, "
        "at chance level (missing: worst; --missing exclude leaves them out) "
        "warning: coverage 66.7%: 33.3% of the candidates have no score"
    )


def test_run_writes_a_run_folder_and_reruns_from_cache(tiny_dataset: Path, tmp_path: Path) -> None:
    experiment = tmp_path / "exp.yaml"
    experiment.write_text(
        f"name: tiny\ndataset: {tiny_dataset}\nprovider: {{name: mock}}\nn_bootstrap: 20\n"
    )
    args = [
        "run",
        str(experiment),
        "--results-dir",
        str(tmp_path / "results"),
        "--cache-dir",
        str(tmp_path / "cache"),
        "--no-progress",
    ]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    folder = tmp_path / "results" / "tiny"
    assert {p.name for p in folder.iterdir()} >= {
        "records.jsonl",
        "metrics.json",
        "report.md",
        "config.yaml",
        "run.json",
    }
    assert json.loads((folder / "run.json").read_text())["model_calls"] == 12
    second = runner.invoke(app, args)
    assert second.exit_code == 0
    assert json.loads((folder / "run.json").read_text())["model_calls"] == 0


def test_run_without_a_file_saves_the_experiment_it_ran(tiny_dataset: Path, tmp_path: Path) -> None:
    """`--dataset/--provider/--prompt` make the experiment; `--save-experiment` writes it, and
    running the file it wrote is the same run (every answer from the cache)."""
    where = ["--results-dir", str(tmp_path / "r"), "--cache-dir", str(tmp_path / "c")]
    saved = tmp_path / "saved.yaml"
    flags = ["--dataset", str(tiny_dataset), "--provider", "mock:mock-2", "--prompt", "cot"]
    args = ["run", *flags, "--set", "n_bootstrap=20", "--save-experiment", str(saved)]
    first = runner.invoke(app, [*args, "--no-progress", *where])
    assert first.exit_code == 0, first.output
    folder = tmp_path / "r" / "mock_mock-2_cot"
    assert json.loads((folder / "run.json").read_text())["model_calls"] == 12
    written = yaml.safe_load(saved.read_text())
    assert written == {
        "name": "mock_mock-2_cot",
        "dataset": str(tiny_dataset),
        "provider": {"name": "mock", "model": "mock-2"},
        "prompt": "cot",
        "n_bootstrap": 20,
    }
    again = runner.invoke(app, ["run", str(saved), "--no-progress", *where])
    assert again.exit_code == 0, again.output
    assert json.loads((folder / "run.json").read_text())["model_calls"] == 0

    sweep = ["--provider", "mock", "--provider", "random", "--prompt", "zero_shot"]
    dry = runner.invoke(app, ["run", "--dataset", str(tiny_dataset), *sweep, "--dry-run", *where])
    assert dry.exit_code == 0, dry.output
    assert "mock_mock-1_zero_shot" in dry.output and "random_uniform" in dry.output
    both = runner.invoke(app, ["run", str(saved), "--provider", "mock", *where])
    assert both.exit_code == 2 and "--set" in both.output
    neither = runner.invoke(app, ["run", "--prompt", "cot", *where])
    assert neither.exit_code == 2 and "--dataset" in neither.output


def test_run_with_a_bad_experiment_file_is_one_line(tmp_path: Path) -> None:
    experiment = tmp_path / "exp.yaml"
    experiment.write_text("name: x\ndataset: data/sample\nprovider: {name: mock}\nrepeats: 0\n")
    result = runner.invoke(app, ["run", str(experiment), "--results-dir", str(tmp_path / "r")])
    assert result.exit_code == 2
    assert "repeats" in result.output and "greater than or equal to 1" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "r").exists()


def test_list_shows_each_registry_one_line_each(tmp_path: Path) -> None:
    from harness.calls.prompting.variants import VARIANTS
    from harness.config.protocols import PROTOCOLS
    from harness.scoring.registry import METRICS
    from providers import REGISTRY

    for what, registry in (
        ("providers", REGISTRY),
        ("prompts", VARIANTS),
        ("metrics", METRICS),
        ("protocols", PROTOCOLS),
    ):
        result = runner.invoke(app, ["list", what], terminal_width=40)
        assert result.exit_code == 0
        assert sorted(line.split()[0] for line in result.output.splitlines()) == sorted(registry)
    listed = runner.invoke(app, ["list", "providers"]).output
    assert "text-embedding     scorer · Cosine between dialogue text" in listed
    assert runner.invoke(app, ["providers"]).output == listed  # the name before 0.3
    (tmp_path / "a.yaml").write_text("# Runs a. On the sample.\n# More.\nname: a\n")
    (tmp_path / "b.yaml").write_text("name: b\n")
    result = runner.invoke(app, ["list", "experiments", "--folder", str(tmp_path)])
    assert result.output.splitlines() == ["a  Runs a", "b"]
    assert runner.invoke(app, ["list", "experiments", "--folder", "nowhere"]).exit_code == 2


def test_a_runs_predictions_evaluate_to_its_own_metrics(tiny_dataset: Path, tmp_path: Path) -> None:
    """One metric code path: a run's predictions.jsonl, fed to `harness evaluate`, gives
    exactly the run's metrics.json (ties and missing scores included)."""
    experiment = tmp_path / "exp.yaml"
    experiment.write_text(
        f"name: tiny\ndataset: {tiny_dataset}\nn_bootstrap: 200\nseed: 3\n"
        "provider: {name: mock, answers: {c0_0: 5.0, c0_1: 5.0, c1_2: 'not json', c2_3: 9.9}}\n"
    )
    args = [
        "run",
        str(experiment),
        "--results-dir",
        str(tmp_path / "r"),
        "--cache-dir",
        str(tmp_path / "c"),
        "--no-progress",
    ]
    assert runner.invoke(app, args).exit_code == 0
    folder = tmp_path / "r" / "tiny"
    lines = [json.loads(line) for line in (folder / "predictions.jsonl").read_text().splitlines()]
    assert [line["item_id"] for line in lines] == ["d0", "d1", "d2"]
    assert lines[1]["scores"]["c1_2"] is None
    out = tmp_path / "evaluated.json"
    result = runner.invoke(
        app,
        [
            "evaluate",
            "--dataset",
            str(tiny_dataset),
            "--predictions",
            str(folder / "predictions.jsonl"),
            "--n-bootstrap",
            "200",
            "--seed",
            "3",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    evaluated, run_metrics = (
        json.loads(out.read_text()),
        json.loads((folder / "metrics.json").read_text()),
    )
    assert evaluated["metrics"] == run_metrics["metrics"]
    assert evaluated["coverage"] == run_metrics["coverage"] == round(11 / 12, 6)
    assert evaluated["tie_rate"] == run_metrics["tie_rate"]


def test_tag_prints_one_json_line_per_file_and_one_error_line_per_bad_file(
    tmp_path: Path,
) -> None:
    pytest.importorskip("librosa")
    from providers.scorers.musicnn import MusicnnWeightsError, locate

    try:
        locate(None)
    except MusicnnWeightsError:
        pytest.skip("musicnn weights not installed (make install)")
    t = np.arange(16000 * 4) / 16000
    good = [tmp_path / "a.wav", tmp_path / "b.flac"]
    for path, freq in zip(good, (220.0, 880.0), strict=True):
        soundfile.write(path, 0.3 * np.sin(2 * np.pi * freq * t), 16000)
    broken = tmp_path / "broken.wav"
    broken.write_bytes(b"RIFF, but not audio")
    result = CliRunner().invoke(
        app, ["tag", "--model", "msd", str(good[0]), str(broken), str(good[1])]
    )
    assert result.exit_code == 1
    lines = [json.loads(x) for x in result.stdout.splitlines() if x.startswith("{")]
    assert [line["file"] for line in lines] == [str(p) for p in good]
    assert all(line["model"] == "MSD_musicnn" and len(line["tags"]) == 50 for line in lines)
    assert all(0.0 <= p <= 1.0 for line in lines for p in line["tags"].values())
    assert f"{broken}: not an audio file" in result.stderr
    bad_model = CliRunner().invoke(app, ["tag", "--model", "xyz", str(good[0])])
    assert bad_model.exit_code == 2 and "--model must be mtt, msd" in bad_model.stderr


def test_evaluate_imports_no_run_machinery(tiny_dataset: Path, tmp_path: Path) -> None:
    """`harness evaluate` of a dataset folder starts without what only runs use (experiment
    files, providers, prompts, YAML): start-up is part of evaluating a pool end to end."""
    import subprocess
    import sys

    pred_file = tmp_path / "preds.jsonl"
    pred_file.write_text('{"item_id": "d0", "scores": {"c0_0": 1}}\n')
    unwanted = [
        "harness.config.experiment",
        "harness.calls.prompting.context_audio",
        "providers",
        "yaml",
    ]
    code = (
        "import sys\nfrom harness.cli.main import app\n"
        f"sys.argv = ['harness', 'evaluate', '--dataset', {str(tiny_dataset)!r}, "
        f"'--predictions', {str(pred_file)!r}]\n"
        "try:\n    app()\nexcept SystemExit as done:\n    assert not done.code, done.code\n"
        f"print('imported:', sorted(m for m in sys.modules if m in {unwanted!r}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines()[-1] == "imported: []"
