"""Which settings make a finished run "another configuration": the cache key's rule. A call
setting (`CALL`) of the block's own provider may change between a run and its re-run, except
one that changes the records though no answer (`reask`); every other setting may not."""

from __future__ import annotations

from typing import Any

import pytest

from harness.runs.run_folder import config_differences


def _run(**provider: Any) -> dict[str, Any]:
    return {"name": "r", "seed": 0, "provider": provider}


@pytest.mark.parametrize(
    ("block", "harmless"),
    [
        ({"name": "gemini"}, {"http_client": "httpx", "api_key_env": "MY_KEY", "batch": True}),
        ({"name": "qwen-omni"}, {"device": "cuda:1", "batch_size": 2, "device_map": "auto"}),
        ({"name": "musicnn"}, {"batch_windows": 4, "wheel": "/w.whl"}),
        ({"name": "mock"}, {"max_concurrency": 3, "timeout_s": 5.0, "label": "m"}),
    ],
)
def test_a_providers_own_call_settings_may_change(
    block: dict[str, Any], harmless: dict[str, Any]
) -> None:
    for key, value in harmless.items():
        assert config_differences(_run(**block), _run(**block, **{key: value})) == []


def test_settings_that_change_answers_or_records_are_differences() -> None:
    base = _run(name="qwen-omni")
    for key, value in {"dtype": "float16", "reask": 0, "temperature": 0.5}.items():
        changed = _run(name="qwen-omni", **{key: value})
        assert config_differences(base, changed) == [f"provider.{key}: None -> {value!r}"]
    # a setting that is a call setting of another provider is not one of this one
    assert config_differences(base, _run(name="qwen-omni", batch=True)) != []


def test_a_provider_no_longer_known_keeps_the_common_rule() -> None:
    old = _run(name="retired", max_concurrency=2, voice="a")
    assert config_differences(old, _run(name="retired", max_concurrency=9, voice="a")) == []
    assert config_differences(old, _run(name="retired", max_concurrency=2, voice="b")) != []


def test_only_the_runs_own_items_and_seed_cache_are_ignored() -> None:
    columns = {"uri": "hf://o/n", "columns": {"items": {"id": "a"}}}
    other = {"uri": "hf://o/n", "columns": {"items": {"id": "b"}}}
    base = {"name": "r", "hf_source": columns, "items": ["d1"], "cache": {"seed": "x"}}
    assert config_differences(base, base | {"items": ["d1", "d2"], "cache": {"seed": None}}) == []
    changed = config_differences(base, base | {"hf_source": other})
    assert changed == ["hf_source.columns.items.id: 'a' -> 'b'"]
