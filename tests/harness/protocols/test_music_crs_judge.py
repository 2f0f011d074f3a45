"""The response judge of `protocol: music-crs`: strict ratings, the experiment file's
`music-crs:` block, and a judge run through the real SDKs against the fake API that yields
the composite, whose re-run makes no call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.calls.prompting.parsing import parse_ratings
from harness.config.experiment import ExperimentConfig
from harness.config.loading import experiments_from
from harness.core.errors import ConfigError
from harness.fake_api import FakeServer
from tests.conftest import run_config
from tests.harness.protocols.test_music_crs import prediction, session_row

pytestmark = [
    pytest.mark.filterwarnings("ignore:Inheritance class Aiohttp:DeprecationWarning"),
    pytest.mark.usefixtures("api_keys"),
]


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        ('{"personalization": 4, "explanation_quality": 2}', None),
        ('```json\n{"explanation_quality": 5, "personalization": 1}\n```', None),
        ('{"personalization": 4.0, "explanation_quality": 2}', "whole number from 1 to 5"),
        ('{"personalization": 6, "explanation_quality": 2}', "whole number from 1 to 5"),
        ('{"personalization": true, "explanation_quality": 2}', "whole number from 1 to 5"),
        ('{"personalization": 4}', "expected exactly personalization, explanation_quality"),
        ('{"personalization": 4, "explanation_quality": 2, "why": "x"}', "expected exactly"),
        ("four and two", "not_json"),
    ],
)
def test_ratings_are_two_whole_numbers_from_1_to_5(answer: str, error: str | None) -> None:
    parsed = parse_ratings(answer, [])
    if error is None:
        assert parsed.error is None and set(parsed.extra) == {
            "personalization",
            "explanation_quality",
        }
    else:
        assert parsed.error is not None and error in parsed.error and not parsed.extra


@pytest.fixture
def submission(tmp_path: Path) -> tuple[Path, Path]:
    sessions = tmp_path / "sessions.jsonl"
    sessions.write_text("".join(json.dumps(session_row(i)) + "\n" for i in range(6)))
    rows = [
        prediction(f"s{i}", t, f"g{i}.{t}", (i + t) % 3 or None)
        for i in range(6)
        for t in (1, 2, 3)
    ]
    rows[0]["predicted_response"] = ""  # an empty response is not judged (as the organisers)
    predictions = tmp_path / "predictions.json"
    predictions.write_text(json.dumps(rows))
    return sessions, predictions


def settings(
    submission: tuple[Path, Path], provider: dict[str, Any], **block: Any
) -> dict[str, Any]:
    sessions, predictions = submission
    return {
        "name": "responses",
        "protocol": "music-crs",
        "dataset": str(sessions),
        "provider": provider,
        "repeats": 2,
        "n_bootstrap": 50,
        "music-crs": {"predictions": str(predictions), **block},
    }


def provider(name: str, server: FakeServer) -> dict[str, Any]:
    if name == "gemini":
        return {"name": "gemini", "base_url": server.url, "temperature": 1.0}
    return {"name": "openai", "model": "gpt-5-mini", "base_url": server.openai_base_url}


@pytest.mark.parametrize("name", ["gemini", "openai"])  # google-genai, openai
def test_a_judge_run_yields_the_composite_and_its_rerun_makes_no_call(
    tmp_path: Path, server: FakeServer, submission: tuple[Path, Path], name: str
) -> None:
    config = ExperimentConfig.model_validate(settings(submission, provider(name, server), sample=4))
    assert config.prompt == "response_judge"
    result, records = run_config(config, tmp_path)
    judged = {r.item_id.partition("#")[0] for r in records}
    assert len(judged) == 4 and result.stats.errors == 0 and result.stats.parse_failures == 0
    assert "s0#1" not in {r.item_id for r in records}  # its response is empty
    metrics = json.loads((result.out_dir / "metrics.json").read_text())
    official = metrics["official"]
    judge = metrics["metrics"]["judge"]
    assert 1 <= judge["mean"] <= 5 and len(judge["repeats"]) == 2 and judge["std"] is not None
    expected = 0.5 * official["ndcg@20"] + 0.1 * official["catalog_diversity"]
    expected += 0.1 * official["lexical_diversity"] + 0.3 * (judge["mean"] - 1) / 4
    assert official["composite"] == pytest.approx(expected, abs=1e-6)
    assert {"personalization", "explanation_quality"} <= set(metrics["metrics"])
    rerun, _ = run_config(config, tmp_path)
    assert rerun.stats.calls == len(records) and rerun.stats.model_calls == 0
    again = json.loads((rerun.out_dir / "metrics.json").read_text())
    assert again["official"] == official
    report = (result.out_dir / "report.md").read_text()
    assert "composite" in report and "## Turns" in report


def test_the_sample_is_seeded(tmp_path: Path, submission: tuple[Path, Path]) -> None:
    from harness.runs.runner import run_dataset

    def drawn(seed: int) -> set[str]:
        block = settings(submission, {"name": "mock"}, sample=3) | {"seed": seed}
        config = ExperimentConfig.model_validate(block)
        return {item.id.partition("#")[0] for item in run_dataset(config).items}

    assert drawn(0) == drawn(0) and len(drawn(0)) == 3
    assert any(drawn(seed) != drawn(0) for seed in range(1, 6))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"music-crs": {"predictions": "p.json", "sampel": 3}}, "music-crs.sampel: Extra inputs"),
        ({"music-crs": {}}, "music-crs.predictions: Field required"),
        ({"music-crs": None}, "music-crs"),
        ({"protocol": "rank"}, "the music-crs: block goes with protocol: music-crs"),
    ],
)
def test_the_protocols_own_block_is_checked_when_the_file_loads(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    raw = settings((tmp_path, tmp_path / "p.json"), {"name": "mock"}) | change
    with pytest.raises(ConfigError, match=message):
        experiments_from(raw, "exp.yaml")
