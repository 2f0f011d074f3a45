"""Fuzz of batch jobs' output lines (OpenAI's output/error files): any line becomes an answer,
an error for its request, or an unreadable line; one line never costs the others (D11)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from providers import create_provider, provider_options
from providers.api.openai_batch import OpenAIBatchApi
from providers.batch import BatchResults
from tests.reliability.fuzz._contract import SETTINGS, json_values, within_contract

KEYS = ["custom_id", "response", "error", "status_code", "body", "choices", "message",
        "content", "usage", "code"]  # fmt: skip


def _api() -> OpenAIBatchApi:
    block = {"name": "openai-compatible", "model": "m", "base_url": "http://127.0.0.1:9/v1"}
    api = create_provider(provider_options({**block, "batch": True})).batch_api()  # type: ignore[attr-defined]
    assert isinstance(api, OpenAIBatchApi)
    return api


API = _api()
lines = st.one_of(
    st.fixed_dictionaries(
        {"custom_id": st.text(max_size=4)},
        optional={
            "response": json_values(KEYS)
            | st.fixed_dictionaries(
                {"status_code": st.sampled_from([200, 400, 500, True, "200"])},
                optional={"body": json_values(KEYS)},
            ),
            "error": json_values(KEYS),
        },
    ).map(json.dumps),
    json_values(KEYS).map(json.dumps),
    st.text(max_size=30),
)


@SETTINGS
@given(line=lines)
def test_any_openai_output_line_costs_itself_only(line: Any) -> None:
    results = BatchResults()

    def read() -> BatchResults:
        API._read_line(line, "batch_1", results)
        return results

    within_contract(read)
    found = len(results.answers) + len(results.errors) + len(results.unreadable)
    assert found >= 1
    for answer in results.answers.values():
        assert isinstance(answer["text"], str)
