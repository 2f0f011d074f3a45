"""Tie-free expected scores from API log-probabilities (`score: expected`): the expected score
from the alternatives along an answer, for tokenizers that split digits and that do not; the
fake API's log-probabilities in the real wire formats (validated by the SDKs' typed models);
and whole runs through both SDKs, whose records carry the expected score next to the greedy
one and whose metrics.json gets its block."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from google.genai import types
from openai.types.chat import ChatCompletion

from harness.config.experiment import ExperimentConfig
from harness.fake_api import FakeServer
from harness.fake_api.answers import ParsedRequest
from harness.fake_api.gemini import gemini_body
from harness.fake_api.logprobs import score_distribution
from harness.fake_api.openai import openai_body
from providers._expected_score import TokenChoice, api_expected_score
from tests.conftest import run_config

pytestmark = pytest.mark.filterwarnings("ignore:Inheritance class Aiohttp:DeprecationWarning")


def steps(*tokens: str | tuple[str, dict[str, float]]) -> list[TokenChoice]:
    """Tokens of an answer; a (token, {alternative: p}) pair gives that step's alternatives."""
    out = []
    for token in tokens:
        if isinstance(token, str):
            out.append(TokenChoice(token, 0.0, ((token, 0.0),)))
        else:
            chosen, probs = token
            top = tuple((t, math.log(p)) for t, p in probs.items())
            out.append(TokenChoice(chosen, math.log(probs[chosen]), top))
    return out


def test_unsplit_numbers_give_every_whole_value() -> None:
    answer = steps('{"', "score", '":', " ", ("9", {"9": 0.5, "10": 0.5}), "}")
    found = api_expected_score(answer, splits_digits=False)
    assert found is not None and found["expected_score"] == pytest.approx(9.5)
    assert found["unresolved_mass"] == 0.0


def test_split_ten_is_resolved_along_the_answer() -> None:
    answer = steps('{"score": ', ("1", {"1": 0.5, "9": 0.5}), ("0", {"0": 1.0}), "}")
    found = api_expected_score(answer, splits_digits=True)
    assert found is not None and found["expected_score"] == pytest.approx(9.5)
    assert found["score_probs"][10] == found["score_probs"][9] == pytest.approx(0.5)


def test_a_split_one_off_the_answer_is_unresolved() -> None:
    # The answer says 9; the API shows "1" as an alternative but not what would follow it.
    answer = steps('{"score": ', ("9", {"9": 0.6, "1": 0.3, "8": 0.1}), "}")
    found = api_expected_score(answer, splits_digits=True)
    assert found is not None
    assert found["expected_score"] == pytest.approx((9 * 0.6 + 8 * 0.1) / 0.7, abs=1e-4)
    assert found["unresolved_mass"] == pytest.approx(0.3)
    # OpenAI's tokenizer writes 10 as one token, so there a lone "1" is 1.
    unsplit = api_expected_score(answer, splits_digits=False)
    assert unsplit is not None and unsplit["unresolved_mass"] == 0.0
    assert unsplit["expected_score"] == pytest.approx(9 * 0.6 + 1 * 0.3 + 8 * 0.1)


def test_the_decimal_step_refines_the_whole_part() -> None:
    answer = steps('{"score": ', ("7", {"7": 0.8, "6": 0.2}), ".", ("5", {"5": 0.5, "4": 0.5}), "}")
    found = api_expected_score(answer, splits_digits=True)
    assert found is not None
    assert found["expected_score"] == pytest.approx(0.8 * 7 + 0.2 * 6 + 0.45)


def test_no_score_gives_none() -> None:
    assert api_expected_score(steps("I", " like", " it"), splits_digits=True) is None


def parsed(text_mode: str = "score", top: int = 5) -> ParsedRequest:
    return ParsedRequest("fake", "system", "Rate this.", [], "schema", None, 0.0, ["user"], top)


def test_openai_wire_format_validates_against_the_sdk() -> None:
    payload, text = openai_body("score", parsed(), 0.0)
    completion = ChatCompletion.model_validate(payload)
    logprobs = completion.choices[0].logprobs
    assert logprobs is not None and logprobs.content
    assert "".join(t.token for t in logprobs.content) == text
    assert all(t.top_logprobs and t.top_logprobs[0].token == t.token for t in logprobs.content)
    assert any(len(t.top_logprobs) > 1 for t in logprobs.content)


def test_gemini_wire_format_validates_against_the_sdk() -> None:
    payload, text = gemini_body("score", parsed(), 0.0)
    response = types.GenerateContentResponse.model_validate(payload)  # extra keys forbidden
    (candidate,) = response.candidates or []
    result = candidate.logprobs_result
    assert result is not None and result.chosen_candidates and result.top_candidates
    assert "".join(c.token or "" for c in result.chosen_candidates) == text
    assert len(result.chosen_candidates) == len(result.top_candidates)
    assert candidate.avg_logprobs is not None


def independent_expected(raw: str, api: str, splits_digits: bool) -> float:
    """The expected score from the fake model's stated distribution, by hand: Gemini's fake
    tokens split digits, OpenAI's keep "10" whole; a judge that takes a lone "1" for "1 or
    1x" cannot resolve one off its answer."""
    found = score_distribution(raw)
    assert found is not None
    whole, digits = found
    greedy = int(json.loads(raw)["score"])
    if splits_digits and greedy not in (1, 10):
        lone_one = 10 if api == "gemini" else 1  # the value a lone "1" token stands for
        whole = {v: p for v, p in whole.items() if v != lone_one}
    mean = sum(v * p for v, p in whole.items()) / sum(whole.values())
    return mean + sum(d * p for d, p in digits.items()) / 10


@pytest.mark.parametrize(
    ("provider", "splits_digits"),
    [("gemini", True), ("openai-audio", False), ("openai-compatible", True)],
)
def test_runs_record_the_expected_score_from_the_sdks(
    provider: str,
    splits_digits: bool,
    tmp_path: Path,
    tiny_dataset: Path,
    server: FakeServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "fake")
    monkeypatch.setenv("OPENAI_API_KEY", "fake")
    block: dict[str, Any] = {"name": provider, "score": "expected", "top_logprobs": 5}
    block["base_url"] = server.url if provider == "gemini" else server.openai_base_url
    if provider == "openai-compatible":
        block["model"] = "Qwen/Qwen2.5-Omni-7B"
    config = ExperimentConfig.model_validate(
        {"name": "lp", "dataset": str(tiny_dataset), "provider": block, "n_bootstrap": 10}
    )
    result, records = run_config(config, tmp_path)
    assert result.stats.errors == 0 and result.stats.parse_failures == 0
    assert all(entry.logprobs == 5 for entry in server.requests())
    for record in records:
        assert record.raw is not None
        api = "gemini" if provider == "gemini" else "openai"
        want = independent_expected(record.raw, api, splits_digits)
        assert record.extra["expected_score"] == pytest.approx(want, abs=1e-3)
    metrics = json.loads((result.out_dir / "metrics.json").read_text())
    assert metrics["expected_score"]["tie_rate"] is not None
    assert metrics["expected_score"]["n_items"] == metrics["n_items"]


def test_greedy_runs_ask_for_no_log_probabilities(
    tmp_path: Path, tiny_dataset: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "fake")
    config = ExperimentConfig.model_validate(
        {
            "name": "greedy",
            "dataset": str(tiny_dataset),
            "provider": {"name": "gemini", "base_url": server.url},
            "n_bootstrap": 10,
        }
    )
    result, records = run_config(config, tmp_path)
    assert all(entry.logprobs is None for entry in server.requests())
    assert all("expected_score" not in r.extra for r in records)
    assert "expected_score" not in json.loads((result.out_dir / "metrics.json").read_text())
