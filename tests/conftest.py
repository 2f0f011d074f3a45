"""Shared fixtures: a tiny dataset written on the fly with synthesised audio, a run of an
experiment config into a work folder, fake API keys and the local fake API server."""

from __future__ import annotations

import os

# Each pytest-xdist worker is a process whose torch and OpenBLAS would size their thread pools
# to every core of the machine, as would the subprocesses the tests start: the workers then
# fight over the same cores (and OpenMP threads spin while they wait). Set before any import
# that loads those libraries.
if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
    os.environ.setdefault("OMP_NUM_THREADS", "1")

import asyncio
import fcntl
import json
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pytest
import soundfile

from harness.calls.cache import ResponseCache
from harness.config.experiment import ExperimentConfig
from harness.core.dataset import Dataset
from harness.core.event_loop import run_coroutine
from harness.core.records import Record, read_records
from harness.fake_api import FakeServer
from harness.reports.loading import RunData, assign_labels, load_run
from harness.runs.runner import Runner, RunResult
from providers import Provider

SAMPLE_RATE = 16000


def write_tiny_dataset(
    root: Path, n_items: int = 3, n_candidates: int = 4, seconds: float = 0.5
) -> Path:
    """Items d0..d{n-1}, each with its own candidates; the human ranking is c<i>_0 best."""
    audio_dir = root / "audio"
    audio_dir.mkdir(parents=True, exist_ok=True)
    clips, items = [], []
    t = np.arange(int(SAMPLE_RATE * seconds)) / SAMPLE_RATE
    for i in range(n_items):
        candidates = []
        for j in range(n_candidates):
            cid = f"c{i}_{j}"
            freq = 220.0 * (1 + i + j / n_candidates)
            soundfile.write(
                audio_dir / f"{cid}.wav", 0.2 * np.sin(2 * np.pi * freq * t), SAMPLE_RATE
            )
            clips.append(
                {
                    "id": cid,
                    "audio": f"audio/{cid}.wav",
                    "caption": f"tone {freq:.0f} Hz",
                    "aspects": ["tone"],
                }
            )
            candidates.append(cid)
        ranking = list(candidates)
        items.append(
            {
                "id": f"d{i}",
                "dialogue": [
                    {"speaker": "A", "text": f"Hello {i}"},
                    {"speaker": "B", "text": "Hi there."},
                ],
                "summary": f"A short greeting number {i}; calm, friendly; soft piano.",
                "candidates": candidates[::-1],
                "human_ranking": ranking,
            }
        )
    (root / "clips.jsonl").write_text("".join(json.dumps(c) + "\n" for c in clips))
    (root / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    return root


@pytest.fixture
def tiny_dataset(tmp_path: Path) -> Path:
    return write_tiny_dataset(tmp_path / "dataset")


# The slow tier: modules (and single tests) that start processes (a `harness run` subprocess, a
# browser), load tiny transformers models, JIT-compile a reference implementation or run
# end-to-end pipelines. `make test-fast` (-m "not slow") leaves them out; `make test` runs all.
# A single slow test elsewhere carries @pytest.mark.slow itself.
SLOW_TESTS = frozenset(
    {
        "tests/bench/test_bench_smoke.py",  # the benchmarks at tiny size, subprocesses
        "tests/harness/construct/annotate/test_annotate_browser.py",  # headless chromium
        "tests/harness/reports/test_server.py",  # `harness view` in a subprocess
        "tests/harness/construct/test_construct_realdata.py",
        "tests/harness/construct/test_refine_set.py",
        "tests/providers/scorers/musicnn/test_reference.py",
        "tests/harness/scoring/test_metrics_reference.py",  # ranx: ~30 s of numba compile
        "tests/providers/local/test_audio_flamingo.py",  # tiny transformers models from here on
        "tests/providers/local/test_chat_templates.py",
        "tests/providers/scorers/test_clap.py",
        "tests/providers/local/test_local.py",
        "tests/providers/scorers/test_ms_clap_paraclap.py",
        "tests/providers/scorers/test_musicnn.py",
        "tests/providers/local/test_phi4_multimodal.py",
        "tests/providers/local/test_qwen_omni.py",
        "tests/providers/scorers/test_text_embedding.py",
        "tests/reliability/test_annotate_app.py",  # `harness` subprocesses from here on
        "tests/reliability/test_bad_cli_options.py",
        "tests/reliability/test_bad_inputs.py",
        "tests/reliability/test_batch_exactly_once.py",
        "tests/reliability/test_concurrent_runs.py",
        "tests/reliability/test_damaged_cache.py",
        "tests/reliability/test_dataset_text_is_not_markup.py",
        "tests/reliability/test_gemini_wrong_key.py",
        "tests/reliability/test_kill_resume.py",
        "tests/reliability/test_malformed_answers.py",
        "tests/reliability/test_permanent_faults.py",
        "tests/reliability/test_records_repair.py",
        "tests/reliability/test_retry_budget.py",
        "tests/reliability/test_run_folder_lock.py",
        "tests/reliability/test_signals.py",
        "tests/reliability/test_transient_faults.py",
        "tests/reliability/test_validate_before_paying.py",
        "tests/test_collection.py",  # a second pytest process
        "tests/bench/test_soak_smoke.py",
        "tests/harness/calls/test_batching.py",  # batch round trips against the fake API
        "tests/harness/construct/test_audio_tags.py",  # the real tagger on real clips
        "tests/harness/construct/test_construct_cli.py",  # the whole pipeline, twice
        "tests/harness/construct/test_stage3.py",
        "tests/providers/scorers/musicnn/test_tagger.py",
        "tests/harness/protocols/test_describe.py",
        "tests/harness/reports/test_html.py",  # headless chromium from here on
        "tests/harness/reports/test_browser_scale.py",
        "tests/harness/reports/test_pool_report.py",
        "tests/harness/reports/test_protocol_report.py",
        "tests/harness/reports/test_publication.py",  # figures in three formats
        "tests/harness/scoring/test_metrics_bruteforce.py",  # every ranking of every tie pattern
        "tests/harness/scoring/test_reliability_recovery.py",  # 100 seeds of simulated judges
        "tests/reliability/test_parser_fuzz.py",  # hypothesis at high example counts
        "tests/reliability/test_secrets.py",  # runs with faults, then a scan of every file
        "tests/harness/construct/test_embed.py",  # the packaged sentence-embedding model
        "tests/harness/protocols/test_refine.py",  # two-turn runs
        "tests/harness/reports/test_report.py",  # whole reports with figures
        "tests/harness/reports/test_sources.py",
        "tests/reliability/fuzz/test_fuzz_cache_values.py",
        # single tests: the module's name, "::", the test's name
        "tests/harness/reports/test_labels.py::test_shortened_labels_stay_unique_and_fit",
        "tests/harness/cli/test_cli.py::test_tag_prints_one_json_line_per_file_and_one_error_line_per_bad_file",
        "tests/providers/api/test_openai_chat.py::test_the_sdk_is_imported_only_when_a_client_is_built",
    }
)
ROOT = Path(__file__).resolve().parents[1]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        module = item.path.relative_to(ROOT).as_posix()
        test = f"{module}::{getattr(item, 'originalname', item.name)}"
        if module in SLOW_TESTS or test in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-snapshots",
        action="store_true",
        default=False,
        help="Rewrite tests/snapshots/*.txt from the current prompt templates.",
    )


def run_experiment(config: ExperimentConfig, **kwargs: Any) -> RunResult:
    """Run one experiment to the end, also from inside a running event loop."""
    return run_coroutine(Runner(config, **kwargs).run())


def load_runs(
    paths: Sequence[Path],
    *,
    dataset: Path | None = None,
    score: Literal["greedy", "expected"] = "greedy",
) -> list[RunData]:
    """Load run folders as `harness report` does (one dataset loaded once), labels assigned."""
    datasets: dict[Path, Dataset] = {}
    runs = [load_run(path, dataset=dataset, datasets=datasets, score=score) for path in paths]
    assign_labels(runs)
    return runs


def run_config(
    config: ExperimentConfig, workdir: Path, provider: Provider | None = None
) -> tuple[RunResult, list[Record]]:
    """Run `config` with its cache in `workdir/cache` and results in `workdir/results`; the
    result and the records it wrote."""
    cache = ResponseCache(workdir / "cache")
    try:
        runner = Runner(
            config,
            cache=cache,
            results_dir=workdir / "results",
            provider=provider,
            show_progress=False,
        )
        result = asyncio.run(runner.run())
    finally:
        cache.close()
    return result, list(read_records(result.out_dir / "records.jsonl"))


def run_pool(
    workdir: Path, dataset: Path, name: str, provider: dict[str, Any], n_bootstrap: int = 20
) -> Path:
    """A pool sweep run of `provider` on `dataset` (query against captions, hit@5 and the
    other cut-off metrics, two repeats); its run folder."""
    config = ExperimentConfig.model_validate(
        {
            "name": name,
            "dataset": str(dataset),
            "sweep": "pool",
            "provider": provider,
            "inputs": {"dialogue": "query", "music": "caption"},
            "metrics": {"at": [5]},  # the matrix product path of the bootstrap
            "repeats": 2,
            "n_bootstrap": n_bootstrap,
        }
    )
    result, _ = run_config(config, workdir)
    return result.out_dir


def write_pool_dataset(
    root: Path,
    n_items: int = 4,
    n_candidates: int = 100,
    *,
    context_seconds: float | None = None,
    n_context: int = 3,
) -> Path:
    """MusiCRS-shaped items: a query, text-only candidates (song titles shared across items),
    three gold titles each, two groups; with `context_seconds`, each item gets `n_context`
    context audio files of that length (44.1 kHz stereo)."""
    root.mkdir(parents=True, exist_ok=True)
    titles = [f"Song number {j}" for j in range(n_candidates + n_items)]
    clips = [{"id": f"s{j}", "title": title} for j, title in enumerate(titles)]
    items = []
    for i in range(n_items):
        candidates = [f"s{j}" for j in range(i, i + n_candidates)]
        item: dict[str, object] = {
            "id": f"q{i}",
            "query": f"Songs for a rainy afternoon, request {i}",
            "dialogue": [{"speaker": "thread", "text": f"Any songs for a rainy day? ({i})"}],
            "group": "left" if i % 2 else "right",
            "candidates": candidates,
            "relevant": candidates[5 : 5 + 3 * (i + 1) : i + 1],
        }
        if context_seconds is not None:
            folder = root / "context" / f"q{i}"
            folder.mkdir(parents=True, exist_ok=True)
            t = np.arange(int(44100 * context_seconds)) / 44100
            files = []
            for k in range(n_context):
                tone = 0.1 * np.sin(2 * np.pi * (200 + 50 * k + i) * t)
                soundfile.write(folder / f"{k}.wav", np.stack([tone, tone], axis=1), 44100)
                files.append(f"context/q{i}/{k}.wav")
            item["context_audio"] = files
        items.append(item)
    (root / "clips.jsonl").write_text("".join(json.dumps(c) + "\n" for c in clips))
    (root / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    return root


@pytest.fixture
def api_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake API keys, and no endpoint or key from the environment that runs the tests."""
    for name in ("GEMINI_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.setenv(name, "sk-fake-test-key")
    for name in ("GOOGLE_API_KEY", "GEMINI_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server() -> Iterator[FakeServer]:
    """The local fake Gemini/OpenAI API, answering in the providers' wire formats."""
    with FakeServer() as running:
        yield running


def shared_folder(factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]) -> Path:
    """A folder that `make(folder)` fills once per test session, shared by the pytest-xdist
    workers (each one's base temporary folder lies in the session's): the first to ask makes
    it, the others wait for it and read it."""
    base = factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    folder = base / name
    with open(f"{folder}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / ".made").is_file():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            make(folder)
            (folder / ".made").touch()
    return folder


@pytest.fixture(scope="session")
def quickstart_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """`make experiment`'s run on the sample set, made once for the session: its results
    folder and what it printed (the golden figures and the README's table are its)."""
    from tests.support.doc_blocks import run_quickstart

    def make(folder: Path) -> None:
        output = run_quickstart(folder / "results", folder / "cache")
        (folder / "stdout.txt").write_text(output, encoding="utf-8")

    folder = shared_folder(tmp_path_factory, "quickstart", make)
    return folder / "results", (folder / "stdout.txt").read_text(encoding="utf-8")


GOLDEN_PORT = 18765


@pytest.fixture(scope="session")
def table7_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Table 7 against the fake API, made once for the session: its results folder. The
    base URL is part of every cache key the golden files hold: one fixed port, taken by one
    test process at a time (of any test session on the machine)."""
    from tests.support.doc_blocks import run_table7

    def make(folder: Path) -> None:
        with open(f"/tmp/bgm-judge-golden-{GOLDEN_PORT}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            run_table7(folder / "results", folder / "cache", port=GOLDEN_PORT)

    return shared_folder(tmp_path_factory, "table7", make) / "results"
