"""One rule makes a provider's cache identity: every `provider:` setting is part of it unless
its declaration marks it as a call setting (`CALL`), so a new option needs no list to keep it
out of the key, and a forgotten mark shows as a key that moves (test_cache_keys_stable.py)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from harness.core.types import BASE_FIELDS, CALL, CallSetting, ProviderConfig
from providers.mock import MockJudge, MockOptions


class _Options(MockOptions):
    voice: str = "calm"  # a new option that changes the answer
    pool_size: Annotated[int, CALL] = Field(default=2, gt=0)  # a new one that does not
    max_concurrency: int = 4  # a call setting declared again, with another default


class _Judge(MockJudge):
    Options = _Options


def test_a_new_option_enters_the_key_where_set_and_a_marked_one_never() -> None:
    default = _Judge(_Options(name="mock")).identity()
    assert "voice" not in default and "pool_size" not in default  # old keys do not move
    assert _Judge(_Options(name="mock", voice="warm")).identity() == default | {"voice": "warm"}
    assert _Judge(_Options(name="mock", pool_size=9)).identity() == default
    assert _Judge(_Options(name="mock", max_concurrency=9)).identity() == default


def test_a_local_batch_size_is_a_call_setting_whatever_its_default() -> None:
    from providers.local.gguf import GgufOptions

    assert "batch_size" in GgufOptions.call_settings()  # re-declared with default 1


def test_the_common_settings_split_into_identity_and_calls() -> None:
    calls = ProviderConfig.call_settings()
    assert set(ProviderConfig(name="x").identity()) == {"name", "temperature"}
    assert set(calls) | {"name", "model", "temperature", "max_tokens", "seed"} == BASE_FIELDS
    # re-asks are keyed by their follow-ups, yet how many are made decides a run's records
    assert [k for k, mark in calls.items() if mark.changes_records] == ["reask"]
    assert all(isinstance(mark, CallSetting) for mark in calls.values())
