"""`extra_body` (extra request fields for an OpenAI-compatible server) cannot replace what the
harness sends from its own settings: a `model` there would be the model actually asked while
records, report, prices and the run folder name the configured one. Such keys are refused
when the experiment file is read (ConfigError naming the field); other fields pass."""

from __future__ import annotations

import pytest

from harness.config.experiment import provider_config
from harness.core.errors import ConfigError
from providers import create_provider
from providers.api.openai_chat import OpenAIOptions


@pytest.mark.parametrize("key", ["model", "messages", "stream", "n"])
def test_extra_body_may_not_override_what_the_harness_sends(key: str) -> None:
    with pytest.raises((ConfigError, ValueError), match=f"extra_body.*{key}"):
        provider_config(
            name="openai-compatible", model="m", base_url="http://x.test/v1", extra_body={key: "x"}
        )


def test_other_extra_fields_are_sent() -> None:
    config = provider_config(
        name="openai-compatible", model="m", base_url="http://x.test/v1", extra_body={"top_k": 20}
    )
    assert isinstance(config, OpenAIOptions)
    judge = create_provider(config)
    from harness.core.types import ChatRequest

    body = judge.request_body(ChatRequest("s", ("u",), None))  # type: ignore[attr-defined]
    assert body["extra_body"] == {"top_k": 20} and body["model"] == "m"
