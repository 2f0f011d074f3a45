"""Command-line conventions: --version and -h, flags without a value hint, --set overrides
validated like the file, a finished run never silently replaced by another configuration,
`harness runs`, and runs without a usable score reported as such, not as chance numbers."""

from __future__ import annotations

import json
import re
from pathlib import Path

import click
import pytest
import yaml
from typer.main import get_command
from typer.testing import CliRunner

import harness
import harness.core.errors
from harness.cli.main import app
from harness.config.loading import load_experiments

runner = CliRunner()


def experiment(tmp_path: Path, dataset: Path, body: str, name: str = "exp") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"name: {name}\ndataset: {dataset}\nn_bootstrap: 20\n{body}")
    return path


def run(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(
        app,
        [
            "run",
            *args,
            "--results-dir",
            str(tmp_path / "results"),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--no-progress",
        ],
    )
    return result.exit_code, result.stdout, result.stderr


def test_version_and_short_help() -> None:
    version = runner.invoke(app, ["--version"])
    assert version.exit_code == 0 and version.stdout.startswith(f"bgm-judge {harness.__version__}")
    for args in (["-h"], ["run", "-h"], ["report", "-h"], ["construct", "stage4", "-h"]):
        shown = runner.invoke(app, args)
        assert shown.exit_code == 0 and "Usage:" in shown.stdout, args


def test_set_overrides_the_file_and_is_validated_like_it(
    tiny_dataset: Path, tmp_path: Path
) -> None:
    path = experiment(tmp_path, tiny_dataset, "provider: {name: mock, model: a}\n")
    (config,) = load_experiments(path, overrides=["provider.model=b", "limit=2", "seed=7"])
    assert (config.provider.model, config.limit, config.seed) == ("b", 2, 7)
    sweep = experiment(
        tmp_path,
        tiny_dataset,
        "providers:\n  - {name: mock, model: a}\n  - {name: mock, model: b}\n",
        "sw",
    )
    configs = load_experiments(
        sweep,
        overrides=["provider.temperature=0.5", "prompts=[zero_shot, cot]", "providers.1.model=c"],
    )
    assert [(c.provider.model, c.prompt) for c in configs] == [
        ("a", "zero_shot"),
        ("a", "cot"),
        ("c", "zero_shot"),
        ("c", "cot"),
    ]
    assert {c.provider.temperature for c in configs} == {0.5}

    code, _, err = run(tmp_path, str(path), "--set", "provider.modle=b")
    assert code == 2 and "with --set provider.modle=b" in err and "'modle'" in err
    code, _, err = run(tmp_path, str(path), "--set", "limit")
    assert code == 2 and "expected KEY=VALUE" in err
    code, _, err = run(tmp_path, str(path), "--set", "limit=-1")
    assert code == 2 and "limit" in err and "Traceback" not in err
    code, _, err = run(tmp_path, str(sweep), "--set", "providers.5.model=x")
    assert code == 2 and "has 2 entries" in err
    code, _, _ = run(tmp_path, str(path), "--set", "provider.model=b", "--set", "limit=2")
    assert code == 0
    saved = yaml.safe_load((tmp_path / "results" / "exp" / "config.yaml").read_text())
    assert saved["provider"]["model"] == "b" and saved["limit"] == 2


def test_a_finished_run_is_not_replaced_by_another_configuration(
    tiny_dataset: Path, tmp_path: Path
) -> None:
    path = experiment(tmp_path, tiny_dataset, "provider: {name: mock, model: a}\n")
    assert run(tmp_path, str(path))[0] == 0
    metrics = (tmp_path / "results" / "exp" / "metrics.json").read_bytes()
    assert run(tmp_path, str(path), "--set", "provider.max_concurrency=2")[0] == 0  # same results
    code, _, err = run(tmp_path, str(path), "--set", "provider.model=b")
    assert code == 2 and "another configuration (provider.model: 'a' -> 'b')" in err
    assert (tmp_path / "results" / "exp" / "metrics.json").read_bytes() == metrics
    code, _, _ = run(tmp_path, str(path), "--set", "provider.model=b", "--overwrite")
    assert code == 0
    saved = yaml.safe_load((tmp_path / "results" / "exp" / "config.yaml").read_text())
    assert saved["provider"]["model"] == "b"
    # A sweep is checked before any of its runs starts.
    sweep = experiment(
        tmp_path,
        tiny_dataset,
        "providers:\n  - {name: mock, model: x}\n  - {name: mock, model: b}\n",
        "sw",
    )
    assert run(tmp_path, str(sweep))[0] == 0
    code, _, err = run(tmp_path, str(sweep), "--set", "providers.1.temperature=0.5")
    assert code == 2 and "mock_b_zero_shot_full_audio" in err


def test_every_call_failed_exits_non_zero_without_chance_numbers(
    tiny_dataset: Path, tmp_path: Path
) -> None:
    path = experiment(
        tmp_path, tiny_dataset, "provider: {name: mock, answers: {'*': '!permanent'}}\n"
    )
    code, out, err = run(tmp_path, str(path))
    assert code == 1 and "12 of 12 call(s) failed" in " ".join(err.split())
    assert "no metrics: exp: every call failed (12 of 12)" in " ".join(out.split())
    assert "Hit@1" not in out and "0.250" not in out
    report = (tmp_path / "results" / "exp" / "report.md").read_text()
    assert "No metrics: every call failed (12 of 12)" in report and "| Hit@1 |" not in report

    unparsable = experiment(
        tmp_path, tiny_dataset, "provider: {name: mock, answers: {'*': 'no'}}\n", "u"
    )
    code, out, _ = run(tmp_path, str(unparsable))
    assert code == 1 and "no usable score in 12 call(s)" in " ".join(out.split())
    assert "Hit@1" not in out


def test_runs_lists_finished_runs_with_key_figures(tiny_dataset: Path, tmp_path: Path) -> None:
    sweep = experiment(
        tmp_path, tiny_dataset, "providers:\n  - {name: random}\n  - {name: mock, model: a}\n", "sw"
    )
    assert run(tmp_path, str(sweep))[0] == 0
    (tmp_path / "results" / "broken").mkdir()
    (tmp_path / "results" / "broken" / "records.partial.jsonl").write_text("")
    listed = runner.invoke(app, ["runs", str(tmp_path / "results")], env={"COLUMNS": "250"})
    assert listed.exit_code == 0, listed.output
    lines = [line for line in listed.stdout.splitlines() if "sw/" in line]
    assert "zero_shot" not in lines[0]  # a scorer takes no prompt
    assert ["random" in lines[0], "mock" in lines[1]] == [True, True]  # the experiment's order
    metrics = json.loads(
        (tmp_path / "results" / "sw" / "mock_a_zero_shot_full_audio" / "metrics.json").read_text()
    )
    assert f"{metrics['metrics']['hit@1']['mean']:.3f}" in lines[1] and "0/12" in lines[1]
    assert "unfinished run" in listed.stderr and "broken" in listed.stderr
    empty = runner.invoke(app, ["runs", str(tmp_path / "nothing")])
    assert empty.exit_code == 2 and "no finished runs" in empty.stderr


MIXED = (
    "providers:\n"
    "  - {name: random, model: uniform, inputs: {music: caption}}\n"
    "  - {name: gemini, model: gemini-2.5-flash}\n"
)


def test_an_unset_api_key_stops_the_run_before_the_first_call(
    tiny_dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not after the offline runs of the sweep (they used to run, then the judge failed
    every call with an auth error and the command exited 1)."""
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    path = experiment(tmp_path, tiny_dataset, MIXED, name="mixed")
    code, _, stderr = run(tmp_path, str(path))
    assert code == 2
    (line,) = stderr.splitlines()
    assert line == (
        "error: missing API key: GEMINI_API_KEY (or GOOGLE_API_KEY) is not set; 12 uncached "
        "call(s) of 1 run(s) need it: gemini_gemini-2.5-flash_zero_shot_full_audio; set it, "
        "or leave those runs out with --only PATTERN (see --dry-run)"
    )
    assert not (tmp_path / "results").exists()  # nothing ran, not even the random baseline
    with pytest.raises(harness.core.errors.HarnessError, match="GEMINI_API_KEY"):
        harness.run(path, results_dir=tmp_path / "api", cache_dir=tmp_path / "cache")
    assert not (tmp_path / "api").exists()


def test_only_runs_part_of_a_sweep(
    tiny_dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    path = experiment(tmp_path, tiny_dataset, MIXED, name="mixed")
    code, _, stderr = run(tmp_path, str(path), "--only", "random*")
    assert code == 0, stderr
    assert [p.name for p in (tmp_path / "results" / "mixed").iterdir() if p.is_dir()] == [
        "random_uniform_full_caption"
    ]
    code, _, stderr = run(tmp_path, str(path), "--only", "clap*")
    assert code == 2
    assert " ".join(stderr.split()) == (
        "error: --only: clap*: matches no run of the experiment (runs: "
        "random_uniform_full_caption, gemini_gemini-2.5-flash_zero_shot_full_audio)"
    )
    (result,) = harness.run(
        path,
        results_dir=tmp_path / "api",
        cache_dir=tmp_path / "cache",
        show_progress=False,
        only=["random*"],
    )
    assert result.out_dir == tmp_path / "api" / "mixed" / "random_uniform_full_caption"


def test_a_missing_dataset_names_the_file_its_line_and_where_it_was_looked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "exp.yaml"
    path.write_text("name: x\ndataset: data/dialbgm\nprovider: {name: random}\n")
    code, _, stderr = run(tmp_path, str(path))
    assert code == 2
    assert " ".join(stderr.split()) == (
        f"error: {path}: line 2: dataset: folder 'data/dialbgm' not found (looked for "
        f"{tmp_path / 'data' / 'dialbgm'}; a relative path is read from the current folder, "
        f"{tmp_path})"
    )
    with pytest.raises(harness.core.errors.ConfigError, match="line 2: dataset: folder"):
        harness.run(path)


def test_the_cli_module_imports_no_pydantic() -> None:
    """Issue 26: `harness --help` starts without building the cache's pydantic schemas; the
    commands import what they use (rich's progress bars too: only a run draws one)."""
    import subprocess
    import sys

    modules = ("pydantic", "numpy", "rich.progress")
    code = f"import sys, harness.cli.main; print(*(m in sys.modules for m in {modules!r}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False", "False"]


def test_run_help_imports_no_pydantic() -> None:
    """The group's --help flag defaults to False, which typer does not coerce through
    pydantic (a None flag it does): start-up stays under its budget."""
    import subprocess
    import sys

    code = (
        "import sys\nsys.argv = ['harness', 'run', '--help']\nfrom harness.cli.main import main\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    code = exc.code\n"
        "print(code, 'pydantic' in sys.modules, file=sys.stderr)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "Usage:" in out.stdout
    assert out.stderr.split() == ["0", "False"]


def test_options_with_choices_show_them() -> None:
    """Not `<str>`: the value column lists what the option takes."""
    from harness.scoring import registry

    metrics = "|".join(m.name for m in registry.metrics() if registry.comparable(m.at(1)))
    for command, option, shown in (
        ("evaluate", "--missing", "<worst|exclude>"),
        ("report", "--correction", "<holm|bh|none>"),
        ("report", "--score", "<greedy|expected>"),
        ("compare", "--metric", metrics),
        ("plan", "--metric", metrics),
    ):
        cli = get_command(app).commands[command]  # type: ignore[attr-defined]
        param = next(p for p in cli.params if option in p.opts)
        assert param.display_type_rich(ctx=click.Context(cli)) == shown, (command, option)


def test_the_top_level_help_lists_the_commands_in_a_study_s_order() -> None:
    shown = runner.invoke(app, ["-h"], terminal_width=200).stdout
    names = re.findall(r"^│ ([a-z]+)  ", shown, flags=re.MULTILINE)
    commands = names[names.index("run") :]
    assert commands[:5] == ["run", "runs", "report", "view", "compare"], commands


def test_overwrite_is_one_flag_everywhere_and_the_old_spelling_still_works(
    tmp_path: Path,
) -> None:
    for command in (["run"], ["merge"], ["construct", "stage4"], ["import", "musicrs"]):
        help_text = runner.invoke(app, [*command, "-h"], terminal_width=200).stdout
        assert "--overwrite " in help_text and "--no-overwrite" not in help_text, command
    with pytest.warns(harness.core.errors.DeprecatedSetting, match="--no-overwrite"):
        old = runner.invoke(app, ["import", "musicrs", str(tmp_path / "none"), "--no-overwrite"])
    assert "No such option" not in old.output and old.exit_code != 0  # the source is missing


def test_a_run_in_python_without_progress_prints_nothing(
    tiny_dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = experiment(tmp_path, tiny_dataset, "provider: {name: random}\n")
    common = {"results_dir": tmp_path / "results", "cache_dir": tmp_path / "cache"}
    harness.run(path, show_progress=False, **common)
    assert capsys.readouterr().out == ""
    code, stdout, _ = run(tmp_path, str(path))  # the command prints the table without the bar
    assert code == 0 and "Hit@1" in stdout and "results in" in stdout
