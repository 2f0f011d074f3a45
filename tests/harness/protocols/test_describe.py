"""`prompt: describe` through both SDKs against the fake API: one schema-enforced request per
item, candidates ranked by a retriever on the description, the description metrics (BLEU-1..4,
ROUGE-L, embedding cosine) with CIs; and those metrics against sacrebleu and rouge-score."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from rouge_score import rouge_scorer
from sacrebleu.metrics.bleu import BLEU

from harness.calls.prompting.parsing import parse_description
from harness.config.experiment import ExperimentConfig
from harness.config.loading import load_experiments
from harness.core.dataset import Clip, Item
from harness.core.errors import ConfigError, HarnessError
from harness.core.records import Record
from harness.fake_api import FakeServer
from harness.scoring import registry
from harness.scoring.description_metrics import description_metrics
from tests.conftest import run_config, write_tiny_dataset

pytestmark = [
    pytest.mark.filterwarnings("ignore:Inheritance class Aiohttp:DeprecationWarning"),
    pytest.mark.usefixtures("api_keys"),
]
N_ITEMS = 3
NAMES = registry.names("description")


def judge(name: str, server: FakeServer) -> dict[str, Any]:
    block: dict[str, Any] = {"name": name, "max_concurrency": 4, "retry_wait_s": 0.02}
    if name == "gemini":
        return block | {"base_url": server.url}
    return block | {"model": "gpt-5-mini", "base_url": server.openai_base_url}


def config(dataset: Path, provider: dict[str, Any], **settings: Any) -> ExperimentConfig:
    return ExperimentConfig.model_validate(
        {
            "name": "describe",
            "dataset": str(dataset),
            "provider": provider,
            "protocol": "describe",
            "inputs": {"dialogue": "full", "music": "caption"},
            "n_bootstrap": 50,
            **settings,
        }
    )


@pytest.mark.parametrize("name", ["gemini", "openai"])  # google-genai, openai
def test_one_request_per_item_then_retrieval_and_description_metrics(
    tmp_path: Path, tiny_dataset: Path, server: FakeServer, name: str
) -> None:
    result, records = run_config(config(tiny_dataset, judge(name, server)), tmp_path)
    assert result.stats.errors == 0 and result.stats.parse_failures == 0
    requests = server.requests()
    assert len(requests) == N_ITEMS and all(r.json_mode == "schema" for r in requests)
    for entry in requests:
        assert entry.response_schema["required"] == ["description"]  # type: ignore[index]
        assert "Hello" in entry.user_text and "tone" not in entry.user_text  # no candidate shown
    assert len(records) == N_ITEMS
    for record in records:
        assert record.extra["description"].startswith("A ")
        assert record.extra["retriever"] == "all-MiniLM-L6-v2"
        assert all(isinstance(v, float) for v in record.scores.values())
        assert -1.0 <= record.extra["reference_cosine"] <= 1.0
    metrics = json.loads((result.out_dir / "metrics.json").read_text())
    assert metrics["coverage"] == 1.0 and "mrr" in metrics["metrics"]
    block = metrics["description"]
    assert block["n_items"] == N_ITEMS and set(block["metrics"]) == set(NAMES)
    for summary in block["metrics"].values():
        low, high = summary["ci95"]
        assert low <= summary["mean"] <= high
    report = (result.out_dir / "report.md").read_text()
    assert "## Descriptions" in report and "BLEU-4" in report
    run_json = json.loads((result.out_dir / "run.json").read_text())
    assert run_json["retriever"]["calls"] == N_ITEMS
    again, _ = run_config(config(tiny_dataset, judge(name, server)), tmp_path)
    assert again.stats.model_calls == 0 and len(server.requests()) == N_ITEMS
    assert (again.out_dir / "metrics.json").read_bytes() == (
        result.out_dir / "metrics.json"
    ).read_bytes()


def test_the_cosine_is_the_text_embedding_score_of_the_human_top_clip(
    tmp_path: Path, tiny_dataset: Path, server: FakeServer
) -> None:
    _, records = run_config(config(tiny_dataset, judge("gemini", server)), tmp_path)
    items = {
        json.loads(line)["id"]: json.loads(line) for line in (tiny_dataset / "items.jsonl").open()
    }
    for record in records:
        top = items[record.item_id]["human_ranking"][0]
        assert record.extra["reference_cosine"] == pytest.approx(record.scores[top], abs=1e-6)


def test_describe_settings_are_checked(tmp_path: Path, tiny_dataset: Path) -> None:
    def load(extra: str) -> None:
        path = tmp_path / "exp.yaml"
        path.write_text(f"name: x\ndataset: {tiny_dataset}\n" + extra)
        load_experiments(path)

    with pytest.raises(ConfigError, match="retriever must be a scorer"):
        load("provider: {name: gemini}\nprotocol: describe\nretriever: {name: gemini}\n")
    with pytest.raises(ConfigError, match=r"by a judge's description \(protocol: describe\)"):
        load("provider: {name: gemini}\nprompt: listwise\nretriever: {name: random}\n")
    with pytest.raises(ConfigError, match="prompt: describe goes with protocol: describe"):
        load("provider: {name: gemini}\nprompt: describe\nprotocol: refine\n")
    with pytest.raises(ConfigError, match="protocol: describe runs a judge, and random is a"):
        load("provider: {name: random}\nprotocol: describe\n")
    with pytest.raises(HarnessError, match=r"set inputs\.music: caption"):
        run_config(config(tiny_dataset, {"name": "gemini"}, inputs={"music": "audio"}), tmp_path)


def test_a_description_answer_is_strict_json() -> None:
    assert parse_description('{"description": "  soft\\n piano "}', ["a"]).extra == {
        "description": "soft piano"
    }
    assert parse_description('{"description": ""}', ["a"]).error is not None
    assert parse_description('{"description": "x", "score": 1}', ["a"]).error is not None
    assert parse_description("soft piano", ["a"]).scores == {"a": None}


# ------------------------------------------------------------------ the metrics themselves
REFERENCES = {
    "a": "Slow calm piano with soft strings.",
    "b": "Fast loud rock with distorted guitar and drums.",
    "c": "A mellow jazz trio with brushed drums and upright bass.",
}
DESCRIPTIONS = {
    "a": "A slow calm piano piece with soft strings.",
    "b": "Loud rock music with guitar.",
    "c": "Mellow jazz with upright bass and brushed drums.",
}


def _items() -> tuple[list[Item], dict[str, Clip]]:
    clips = {
        f"{k}{j}": Clip(id=f"{k}{j}", caption=REFERENCES[k] if j == 0 else "other")
        for k in REFERENCES
        for j in range(2)
    }
    items = [
        Item(id=k, query="q", candidates=(f"{k}1", f"{k}0"), relevant=(f"{k}0",))
        for k in REFERENCES
    ]
    return items, clips


def _records(descriptions: dict[str, str], cosine: float = 0.5) -> list[Record]:
    return [
        Record(
            item_id=k,
            candidates=[],
            scores={},
            extra={"description": d, "reference_cosine": cosine},
        )
        for k, d in descriptions.items()
    ]


def test_bleu_is_sacrebleus_corpus_bleu_and_rouge_l_rouge_scores() -> None:
    items, clips = _items()
    block = description_metrics(items, clips, _records(DESCRIPTIONS), n_bootstrap=200)
    assert block is not None and block["n_items"] == 3
    hypotheses = list(DESCRIPTIONS.values())
    references = [list(REFERENCES.values())]
    for order in (1, 2, 3, 4):
        expected = BLEU(max_ngram_order=order, lowercase=True).corpus_score(hypotheses, references)
        assert block["metrics"][f"bleu_{order}"]["mean"] == pytest.approx(
            expected.score / 100, abs=1e-6
        )
    scorer = rouge_scorer.RougeScorer(["rougeL"])
    rouge = [scorer.score(REFERENCES[k], DESCRIPTIONS[k])["rougeL"].fmeasure for k in REFERENCES]
    assert block["metrics"]["rouge_l"]["mean"] == pytest.approx(sum(rouge) / 3, abs=1e-6)
    assert block["metrics"]["embedding_cosine"] == {"mean": 0.5, "ci95": [0.5, 0.5]}


def test_a_description_equal_to_its_reference_scores_one() -> None:
    items, clips = _items()
    block = description_metrics(items, clips, _records(REFERENCES, cosine=1.0), n_bootstrap=50)
    assert block is not None
    assert {name: block["metrics"][name]["mean"] for name in NAMES} == dict.fromkeys(NAMES, 1.0)
    assert description_metrics(items, clips, [], n_bootstrap=50) is None


def test_the_sample_experiment_through_both_sdks(
    tmp_path: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """experiments/describe_sample.yaml on the bundled sample set, against the fake API."""
    from harness.calls.cache import ResponseCache
    from tests.conftest import run_experiment

    root = Path(__file__).resolve().parents[3]
    if not (root / "data" / "sample" / "audio").is_dir():
        pytest.skip("sample audio not built (make sample-audio)")
    monkeypatch.chdir(root)
    monkeypatch.setenv("GEMINI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
    runs = [r for r in load_experiments("experiments/describe_sample.yaml") if "full" in r.name]
    assert [r.provider.name for r in runs] == ["gemini", "openai"]
    cache = ResponseCache(tmp_path / "cache")
    try:
        for run in runs:
            result = run_experiment(run, cache=cache, results_dir=tmp_path, show_progress=False)
            metrics = json.loads((result.out_dir / "metrics.json").read_text())
            assert metrics["n_items"] == 26 and set(metrics["description"]["metrics"]) == set(NAMES)
    finally:
        cache.close()
    by_api = [sum(r.api == api for r in server.requests()) for api in ("gemini", "openai")]
    assert by_api == [26, 26]


@pytest.mark.skipif(
    importlib.util.find_spec("musicnn") is None, reason="musicnn weights not installed"
)
def test_a_musicnn_retriever_compares_the_description_with_each_clips_tags(
    tmp_path: Path, server: FakeServer
) -> None:
    dataset = write_tiny_dataset(tmp_path / "audio set", n_items=2, seconds=3.5)
    settings = {"inputs": {"music": "audio"}, "retriever": {"name": "musicnn", "top_k": 3}}
    result, records = run_config(config(dataset, judge("gemini", server), **settings), tmp_path)
    assert result.stats.errors == 0 and len(server.requests()) == 2
    for record in records:
        tags = record.extra["retriever_descriptions"]
        assert set(tags) == set(record.candidates) and all(
            t.count(", ") == 2 for t in tags.values()
        )
        assert record.extra["retriever"] == "MTT_musicnn"
        assert len(set(record.scores.values())) > 1
    metrics = json.loads((result.out_dir / "metrics.json").read_text())
    assert metrics["description"]["metrics"]["embedding_cosine"]["mean"] is not None
