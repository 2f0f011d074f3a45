"""D25: the JSON files a run writes hold finite numbers only (JSON has no NaN or Infinity; a
strict reader refuses them): huge graded relevance does not make nDCG NaN, and token counts
too large to price leave the cost unknown instead of `Infinity`."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from harness.calls.cache import ResponseCache
from harness.cli.main import app
from harness.core.sanitize import dumps_json
from tests.reliability.conftest import MakeDataset


def _strict(path: Path) -> Any:
    def refuse(constant: str) -> None:
        raise AssertionError(f"{path.name} holds {constant}")

    return json.loads(path.read_text(), parse_constant=refuse)


def _run(dataset: Path, work: Path, **provider: Any) -> tuple[int, str]:
    experiment = work / "e.yaml"
    config = {
        "name": "run",
        "dataset": str(dataset),
        "provider": {"name": "mock", **provider},
        "n_bootstrap": 20,
    }
    experiment.write_text(yaml.safe_dump(config, sort_keys=False))
    options = ["--results-dir", str(work / "results"), "--cache-dir", str(work / "cache")]
    result = CliRunner().invoke(app, ["run", str(experiment), *options, "--no-progress"])
    assert "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.output


def _graded(dataset: Path, gains: list[float]) -> None:
    items = [json.loads(line) for line in (dataset / "items.jsonl").read_text().splitlines()]
    for item in items:
        item.pop("human_ranking")
        item["relevance"] = dict(zip(item["candidates"], gains, strict=True))
    (dataset / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))


@pytest.mark.slow
def test_d25_huge_graded_relevance_gives_finite_metrics(
    make_dataset: MakeDataset, tmp_path: Path
) -> None:
    dataset = make_dataset(n_items=3)
    _graded(dataset, [2.0**1023, 2.0**1023, 2.0**1023, 2.0**1022])  # their DCG overflows
    code, output = _run(dataset, tmp_path)
    assert code == 0, output
    metrics = _strict(tmp_path / "results" / "run" / "metrics.json")["metrics"]
    assert 0.0 <= metrics["ndcg"]["mean"] <= 1.0
    # The same numbers as gains 4:4:4:2: nDCG does not depend on the gains' scale.
    small = make_dataset(n_items=3, name="small")
    _graded(small, [4.0, 4.0, 4.0, 2.0])
    (tmp_path / "s").mkdir()
    assert _run(small, tmp_path / "s")[0] == 0
    assert _strict(tmp_path / "s" / "results" / "run" / "metrics.json")["metrics"] == metrics


@pytest.mark.slow
@pytest.mark.parametrize("tokens", [10**308, 10**400])
def test_d25_token_counts_too_large_to_price_leave_the_cost_unknown(
    tokens: int, make_dataset: MakeDataset, tmp_path: Path
) -> None:
    dataset = make_dataset(n_items=1)
    provider = {"answers": {"*": 5}, "prices": {"input": 1.0, "output": 8.0}}
    assert _run(dataset, tmp_path, **provider)[0] == 0
    cache = ResponseCache(tmp_path / "cache")
    try:  # token counts planted in the cache (an integer of any size is valid JSON)
        for key in list(cache._store.iterkeys()):
            value = cache.get(key)
            assert value is not None
            cache.set(key, {**value, "input_tokens": tokens, "output_tokens": tokens})
    finally:
        cache.close()
    shutil.rmtree(tmp_path / "results")
    code, output = _run(dataset, tmp_path, **provider)
    assert code == 0, output
    cost = _strict(tmp_path / "results" / "run" / "run.json")["cost"]
    assert cost["usd"] is None and cost["usd_spent"] is None
    assert "too large" in cost["note"]


finite_or_not = st.floats(allow_nan=True, allow_infinity=True)
plain = st.recursive(
    st.none() | st.booleans() | st.integers() | finite_or_not | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(plain)
def test_d25_the_json_encoder_never_writes_nan_or_infinity(value: Any) -> None:
    text = dumps_json(value)
    decoded = json.loads(text, parse_constant=lambda c: pytest.fail(f"wrote {c}"))

    def same(a: Any, b: Any) -> bool:
        if isinstance(a, float):
            return b == a if math.isfinite(a) else b is None
        if isinstance(a, list | tuple):
            return len(a) == len(b) and all(map(same, a, b))
        if isinstance(a, dict):
            return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
        return bool(a == b)

    assert same(value, decoded)
