"""The price table, experiment-file overrides, and the cost of a run from its records."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from harness.calls.pricing import PRICES, Price, cost_line, price_for, run_cost
from harness.core.records import Record
from harness.core.types import ProviderConfig


def config(**prices: float) -> ProviderConfig:
    return ProviderConfig(name="gemini", prices=prices or None)


def test_audio_tokens_are_priced_at_the_audio_rate() -> None:
    price = Price(input=2.5, input_audio=40.0, output=10.0)
    assert price.cost(2_000_000, 1_000_000, 1_000_000) == pytest.approx(2.5 + 40.0 + 10.0)
    assert Price(input=1.0, output=2.0).cost(1_000_000, 0, 1_000_000) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("gemini-2.5-flash", "gemini-2.5-flash"),
        ("models/gemini-2.5-pro", "gemini-2.5-pro"),
        ("gemini-2.5-flash-lite-preview-06-17", "gemini-2.5-flash-lite"),
        ("gpt-4o-audio-preview-2025-06-03", "gpt-4o-audio-preview"),
    ],
)
def test_models_find_their_family_price(model: str, family: str) -> None:
    assert price_for(config(), model) == PRICES[family]


def test_unknown_models_have_no_price() -> None:
    assert price_for(config(), "Qwen/Qwen2.5-Omni-7B") is None
    assert price_for(config(), "gemini-2.5") is None


def test_the_experiment_file_overrides_the_table() -> None:
    assert price_for(config(input=1.0, output=3.0), "gemini-2.5-pro") == Price(1.0, 3.0)
    with pytest.raises(ValidationError, match="prices"):
        config(input=1.0)
    with pytest.raises(ValidationError, match="audio_in"):
        config(input=1.0, output=1.0, audio_in=2.0)


def record(cache_hit: bool, tokens_in: int = 1_000_000, audio: int = 0) -> Record:
    return Record(
        item_id="d0",
        candidates=["c"],
        scores={"c": 1.0},
        cache_hit=cache_hit,
        input_tokens=tokens_in,
        output_tokens=100_000,
        extra={"input_audio_tokens": audio} if audio else {},
    )


def test_run_cost_separates_what_this_run_spent() -> None:
    records = [record(False, audio=500_000), record(True)]
    cost = run_cost(config(), "gpt-4o-audio-preview", records)
    spent = (500_000 * 2.5 + 500_000 * 40 + 100_000 * 10) / 1e6
    assert cost["usd_spent"] == pytest.approx(spent)
    assert cost["usd"] == pytest.approx(spent + (1_000_000 * 2.5 + 100_000 * 10) / 1e6)
    assert cost["usage"]["calls"] == 2 and cost["usage_spent"]["input_audio_tokens"] == 500_000
    line = cost_line(cost)
    assert line is not None and f"${cost['usd']:.4f}" in line and "2025-09" in line


def test_run_cost_without_a_price_says_why() -> None:
    cost = run_cost(config(), "my-local-model", [record(False)])
    assert cost["usd"] is None and "provider.prices" in cost["note"]
    assert cost_line(cost) is None


def paid_record(cache_hit: bool = False, **extra: object) -> Record:
    return Record(
        item_id="d1",
        candidates=["c1"],
        repeat=0,
        scores={"c1": 5.0},
        input_tokens=2_000_000,
        output_tokens=1_000_000,
        cache_hit=cache_hit,
        extra=dict(extra),
    )


def test_batch_and_prompt_cache_discounts_are_broken_out() -> None:
    prices = config(input=1.0, input_cached=0.25, output=2.0)
    records = [
        paid_record(),  # online, no cache: $4
        paid_record(cached_input_tokens=1_000_000),  # online, half its input cached: $4 - $0.75
        paid_record(batch="batch_1", cached_input_tokens=1_000_000),  # ($4 - $0.75) / 2
    ]
    cost = run_cost(prices, "m", records)
    assert cost["usd_online"] == pytest.approx(12.0)
    assert cost["cache_discount"] == pytest.approx(1.5)
    assert cost["batch_discount"] == pytest.approx(3.25 / 2)
    assert cost["usd"] == pytest.approx(12.0 - 1.5 - 3.25 / 2)
    assert cost["usage"]["cached_input_tokens"] == 2_000_000
    assert cost["usage"]["batch_calls"] == 1
    line = cost_line(cost)
    assert line is not None and "batch and" in line and "prompt cache discount" in line


def test_without_a_cached_rate_no_cache_discount_is_claimed() -> None:
    cost = run_cost(config(input=1.0, output=2.0), "m", [paid_record(cached_input_tokens=10**6)])
    assert cost["cache_discount"] == 0.0 and cost["usd"] == cost["usd_online"]


def test_a_batch_share_above_one_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"prices\.batch"):
        config(input=1.0, output=2.0, batch=1.5)


@given(
    st.lists(
        st.tuples(
            st.integers(0, 10**6),
            st.integers(0, 10**6),
            st.integers(0, 2 * 10**6),
            st.booleans(),
        ),
        max_size=20,
    ),
    st.floats(0.0, 1.0),
)
def test_discounts_never_exceed_the_online_cost(
    calls: list[tuple[int, int, int, bool]], share: float
) -> None:
    prices = config(input=1.0, input_cached=0.1, output=3.0, batch=share)
    records = [
        Record(
            item_id="d",
            candidates=["c"],
            repeat=0,
            scores={},
            input_tokens=tokens_in,
            output_tokens=tokens_out,
            extra={"cached_input_tokens": cached, **({"batch": "b"} if batch else {})},
        )
        for tokens_in, tokens_out, cached, batch in calls
    ]
    cost = run_cost(prices, "m", records)
    assert 0.0 <= cost["usd"] <= cost["usd_online"] + 1e-9
    assert cost["usd"] == pytest.approx(
        cost["usd_online"] - cost["cache_discount"] - cost["batch_discount"], abs=1e-5
    )
