"""The one contract of every file format the harness reads back (issue 27): whatever the
bytes, reading them ends in a value (a counted miss where the format has misses) or in one
HarnessError line, never another exception, and within a stated bound of memory (MAX_PEAK)
and time (the `deadline` of SETTINGS, per example)."""

from __future__ import annotations

import json
import os
import tracemalloc
from collections.abc import Callable
from typing import Any, TypeVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from harness.core.errors import HarnessError

T = TypeVar("T")

MAX_PEAK = 64 * 1024 * 1024  # bytes allocated at the peak of reading one fuzzed file
# `make test-fuzz` (BGM_JUDGE_FUZZ=nightly): ten times the examples, drawn afresh each run
# (hypothesis prints the seed of a failure); `make test` draws the same ones every run.
NIGHTLY = os.environ.get("BGM_JUDGE_FUZZ") == "nightly"
EXAMPLES = 40
SETTINGS = settings(
    max_examples=EXAMPLES * 10 if NIGHTLY else EXAMPLES,
    deadline=2000,  # ms per example: a reader that walks an expanded value takes far longer
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=not NIGHTLY,
)


def within_contract(read: Callable[[], T]) -> T | HarnessError:
    """`read()`'s value, or the HarnessError it raised (one non-empty line); any other
    exception fails the test, as does a peak allocation above MAX_PEAK."""
    tracemalloc.start()
    try:
        return read()
    except HarnessError as exc:
        text = str(exc)
        assert text.strip() and "\n" not in text, repr(text)
        assert "Traceback" not in text
        return exc
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak <= MAX_PEAK, f"peak {peak} bytes"


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
)


def json_values(keys: list[str] | None = None) -> st.SearchStrategy[Any]:
    """Any JSON-like value, with dict keys drawn mostly from the format's own `keys`."""
    names = st.sampled_from(keys) | st.text(max_size=8) if keys else st.text(max_size=8)
    return st.recursive(
        SCALARS,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(names, inner, max_size=5),
        max_leaves=20,
    )


def json_lines(keys: list[str], valid: Callable[[], st.SearchStrategy[dict[str, Any]]]) -> Any:
    """Lines of a JSONL format: mostly objects with the format's keys (some valid, some with
    a value of another type), with torn lines, deep nesting and bytes that are not UTF-8."""
    objects = st.one_of(valid(), st.dictionaries(st.sampled_from(keys), json_values(keys)))
    line = st.one_of(
        objects.map(lambda o: json.dumps(o, allow_nan=True)),
        objects.map(lambda o: json.dumps(o)[: max(1, len(json.dumps(o)) // 2)]),
        st.integers(min_value=1, max_value=50_000).map(lambda n: "[" * n + "]" * n),
        st.text(max_size=30),
    )
    return st.lists(line, min_size=1, max_size=6)
