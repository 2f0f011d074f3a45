"""The experiment files that mirror the DialBGM paper's tables, and `cot_gemini` end to end
against the local fake Gemini server (the acceptance run of `make experiment EXP=cot_gemini`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from harness.calls.prompting.fewshot import check_no_leak, load_examples
from harness.cli.main import app
from harness.config.experiment import ExperimentConfig
from harness.config.loading import load_experiments
from harness.core.dataset import load_dataset
from harness.core.records import read_records
from harness.fake_api import FakeServer

ROOT = Path(__file__).resolve().parents[3]
EXPERIMENTS = ROOT / "experiments"
PAPER = {
    "table3_pointwise": "table3",
    "table4_5_text_only": "table4_5",
    "table6_joint": "table6",
    "table7_cot": "table7",
    "table8_few_shot": "table8",
    "cot_gemini": "cot_gemini",
}


def runs(name: str) -> list[ExperimentConfig]:
    return load_experiments(EXPERIMENTS / f"{name}.yaml")


@pytest.mark.parametrize("name", PAPER)
def test_paper_experiment_files_load(name: str) -> None:
    configs = runs(name)
    assert configs and {c.sweep or c.name for c in configs} == {PAPER[name]}
    assert all(c.dataset == Path("data/sample") for c in configs)


def test_table3_covers_every_judge_and_scorer_with_audio_full_and_summary() -> None:
    configs = runs("table3_pointwise")
    providers = {c.provider.name for c in configs}
    assert providers == {
        "gemini",
        "openai-audio",
        "qwen-omni",
        "phi4-multimodal",
        "audio-flamingo-3",
        "music-flamingo",
        "clap",
        "ms-clap",
        "paraclap",
        "text-embedding",
    }
    for provider in providers:
        mine = [c for c in configs if c.provider.name == provider]
        assert {c.inputs.dialogue for c in mine} == {"full", "summary"}
        expected = "caption" if provider == "text-embedding" else "audio"
        assert {c.inputs.music for c in mine} == {expected}
    assert {c.prompt for c in configs} == {"zero_shot"}


def test_tables_4_to_8_use_their_variants() -> None:
    text_only = runs("table4_5_text_only")
    assert {(c.prompt, c.inputs.music) for c in text_only} == {("text_only", "caption")}
    assert {c.inputs.dialogue for c in text_only} == {"full", "summary"}
    joint = runs("table6_joint")
    assert {c.prompt for c in joint} == {"joint"}
    assert all(c.prompt_options["order"] == "permuted" and c.repeats > 1 for c in joint)
    assert {c.prompt for c in runs("table7_cot")} == {"zero_shot", "cot"}
    few = runs("table8_few_shot")
    assert {c.prompt for c in few} == {"zero_shot", "few_shot"}


@pytest.mark.skipif(
    not (ROOT / "data/sample/audio").is_dir(), reason="sample audio not built (make sample-audio)"
)
def test_table8_examples_are_outside_the_sample_set() -> None:
    (config, *_) = [c for c in runs("table8_few_shot") if c.prompt == "few_shot"]
    examples = load_examples(config.prompt_options, ROOT / config.dataset)
    assert len(examples) == config.prompt_options["k"]
    evaluated = load_dataset(ROOT / config.dataset).items
    check_no_leak(examples, evaluated, ROOT / config.dataset)  # raises on a leak


def table_header(output: str) -> str:
    """The column header line of the results table the CLI prints."""
    (line,) = [row for row in output.splitlines() if "Hit@1" in row]
    return re.sub(r"\s+", " ", re.sub(r"[^\w@ %-]", " ", line)).strip()


def test_cot_gemini_end_to_end_on_the_fake_server(
    tiny_dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    raw = yaml.safe_load((EXPERIMENTS / "cot_gemini.yaml").read_text())
    experiment = tmp_path / "cot_gemini.yaml"
    experiment.write_text(yaml.safe_dump({**raw, "dataset": str(tiny_dataset)}))
    args = ["run", str(experiment), "--results-dir", str(tmp_path / "results")]
    args += ["--cache-dir", str(tmp_path / "cache"), "--no-progress"]
    cli = CliRunner()
    with FakeServer() as server:
        monkeypatch.setenv("GEMINI_BASE_URL", server.gemini_base_url)
        monkeypatch.setenv("GEMINI_API_KEY", "anything")
        first = cli.invoke(app, args)
        assert first.exit_code == 0, first.output
        stats = server.stats()
        again = cli.invoke(app, args)
        assert again.exit_code == 0, again.output
        assert server.stats()["requests"] == stats["requests"]  # the re-run is all cache
    assert stats["requests"] == 12 and stats["audio_parts"] == 12
    assert stats["json_mode"] == {"None": 12}  # free-text reasoning: no JSON mode
    assert stats["model"] == {"gemini-2.5-pro": 12}

    out = tmp_path / "results" / "cot_gemini"
    records = list(read_records(out / "records.jsonl"))
    assert len(records) == 12 and all(r.parse_error is None and r.error is None for r in records)
    for name in ("metrics.json", "report.md", "config.yaml", "run.json"):
        assert (out / name).is_file()
    # Marked: the numbers come from the fake server, not from Gemini.
    assert re.search(r"│ cot_gemini † +│", first.output.replace("┃", "│"))
    assert "endpoint provider: http://127.0.0.1" in (out / "report.md").read_text()

    # The same table as the offline quickstart: compare with a scorer run's header.
    scorer = tmp_path / "scorer.yaml"
    scorer.write_text(
        yaml.safe_dump(
            {
                "name": "scorer",
                "dataset": str(tiny_dataset),
                "provider": {"name": "random", "model": "uniform"},
                "inputs": {"dialogue": "full", "music": "caption"},
            }
        )
    )
    baseline = cli.invoke(app, ["run", str(scorer), *args[2:]])
    assert baseline.exit_code == 0, baseline.output
    assert table_header(first.output) == table_header(baseline.output)
    assert table_header(first.output).split() == [
        "run", "Hit@1", "MRR", "nDCG", "tau-b", "items", "coverage", "tie", "rate",
    ]  # fmt: skip


@pytest.mark.parametrize(("table", "dialogue"), [(4, "full"), (5, "summary")])
def test_gpt5_mini_rows_of_tables_4_and_5_run_text_only_on_the_openai_api(
    table: int,
    dialogue: str,
    tiny_dataset: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.conftest import run_config

    (config,) = runs(f"table{table}_gpt5_mini")
    assert (config.provider.name, config.provider.model) == ("openai", "gpt-5-mini")
    assert (config.prompt, config.inputs.dialogue, config.inputs.music) == (
        "text_only",
        dialogue,
        "caption",
    )
    with FakeServer() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "anything")
        result, records = run_config(
            config.model_copy(update={"dataset": tiny_dataset, "n_bootstrap": 10}), tmp_path
        )
        requests = server.requests()
    assert result.stats.errors == 0 and result.stats.parse_failures == 0
    assert len(requests) == 12 and {e.model for e in requests} == {"gpt-5-mini"}
    assert all(e.audio_parts == 0 and e.json_mode == "schema" for e in requests)
    assert all(e.temperature == 1.0 and "modalities" not in e.fields for e in requests)
    assert all("logprobs" not in e.fields for e in requests)
    if dialogue == "summary":
        assert all("A short greeting number" in e.user_text for e in requests)
    assert len(records) == 12
