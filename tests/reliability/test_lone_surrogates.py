"""D3: an answer holding a lone surrogate (what the JSON escape `"\\ud800"` decodes to) is text
like any other: it is re-asked, keyed, cached and written without UnicodeEncodeError, with
U+FFFD in its place, and a re-run that finds it in the cache does not crash either."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from harness.calls.cache import ResponseCache
from harness.calls.prompting.parsing import loads_object, parse_description, parse_summary
from harness.cli.main import app
from harness.core.json_text import canonical_json
from harness.fake_api import FakeServer
from harness.protocols.feedback import _parse
from tests.reliability.conftest import FAST, MakeDataset, fast_settings, read_jsonl

PROVIDERS = {
    "gemini": lambda server: {"name": "gemini", "base_url": server.gemini_base_url},
    "openai-compatible": lambda server: {
        "name": "openai-compatible",
        "base_url": server.openai_base_url,
    },
}


def _cli_run(dataset: Path, provider: dict[str, Any], work: Path) -> tuple[int, str]:
    experiment = work / "e.yaml"
    config = {
        "name": "run",
        "dataset": str(dataset),
        "provider": {**FAST, "reask": 1, **provider},
        "n_bootstrap": 20,
    }
    experiment.write_text(yaml.safe_dump(config, sort_keys=False))
    options = ["--results-dir", str(work / "results"), "--cache-dir", str(work / "cache")]
    result = CliRunner().invoke(app, ["run", str(experiment), *options, "--no-progress"])
    assert "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.output


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PROVIDERS))
def test_d3_lone_surrogate_answer_is_reasked_cached_and_rerun(
    name: str, make_dataset: MakeDataset, tmp_path: Path
) -> None:
    dataset = make_dataset(n_items=1)
    with FakeServer(fast_settings()) as server:
        provider = {**PROVIDERS[name](server), "model": "fake-answer-lone_surrogate"}
        code, output = _cli_run(dataset, provider, tmp_path)
        assert code == 1 and "no usable score" in output, output  # unparsable, recorded
        asked = len(server.requests())
        assert asked == 8  # 4 calls, each re-asked once: the re-ask key held the surrogate
        # The re-run answers every call (first attempts and re-asks) from the cache.
        again, output = _cli_run(dataset, provider, tmp_path)
        assert again == 1, output
        assert len(server.requests()) == asked
    records = read_jsonl(tmp_path / "results" / "run" / "records.jsonl")
    assert len(records) == 4
    for record in records:
        assert record["raw"].startswith("\ufffd ") and record["raw"].endswith(" \ufffd")
        (attempt,) = record["attempts"]
        assert attempt.startswith("\ufffd ") and attempt.endswith(" \ufffd")


@pytest.mark.slow
def test_d3_a_surrogate_cached_by_an_older_harness_is_read_as_replaced_text(
    make_dataset: MakeDataset, tmp_path: Path
) -> None:
    dataset = make_dataset(n_items=1)
    provider = {"name": "mock", "answers": {"*": 5}}
    assert _cli_run(dataset, provider, tmp_path)[0] == 0
    cache = ResponseCache(tmp_path / "cache")
    try:  # what a harness without the replacement stored: the raw answer, surrogate and all
        for key in list(cache._store.iterkeys()):
            value = cache.get(key)
            assert value is not None
            cache.set(key, {**value, "text": '{"score": 5} \ud800'})
    finally:
        cache.close()
    shutil.rmtree(tmp_path / "results")  # a new run folder: its records come from the cache
    code, output = _cli_run(dataset, provider, tmp_path)
    assert code == 0, output
    records = read_jsonl(tmp_path / "results" / "run" / "records.jsonl")
    # The cached answer (unusable: text after the JSON) is read with U+FFFD and re-asked.
    assert [r["attempts"] for r in records] == [['{"score": 5} \ufffd']] * 4
    assert {r["raw"] for r in records} == {'{"score": 5}'}


ESCAPED = '"more \\ud800 jazz, less \\udfff"'  # JSON escapes in the model's own JSON answer


@pytest.mark.parametrize(
    ("answer", "read"),
    [
        ('{"feedback": ' + ESCAPED + "}", lambda t: _parse(t).text),
        ('{"summary": "' + "a calm evening talk " * 5 + ESCAPED[1:] + "}", parse_summary),
        (
            '{"description": ' + ESCAPED + "}",
            lambda t: parse_description(t, ["a", "b"]).extra["description"],
        ),
        ('{"reason": ' + ESCAPED + ', "score": 5}', lambda t: str(loads_object(t))),
    ],
    ids=["simulator_reply", "summary", "description", "any_field"],
)
def test_a_surrogate_escaped_in_an_answers_json_is_replaced_where_it_is_read(
    answer: str, read: Any
) -> None:
    """Issue 48: a user simulator's reply `{"feedback": "\\ud800"}` became the text of the
    judge's next request, whose key (canonical_json) raised UnicodeEncodeError in the run
    and in every re-run."""
    text = read(answer)
    assert "\ufffd" in text and text.encode("utf-8")
    assert canonical_json({"feedback": text})
