"""The `jury` provider: its combinations of the members' scores, and a sweep where the jury
runs after its members: it makes no model call (every member's answer is in the cache under
the member's own key), its records keep each member's answer, and the comparison shows the
jury beside its members."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import harness
from harness.calls.cache import ResponseCache
from harness.config.experiment import ExperimentConfig, SweepConfig
from harness.core.errors import ConfigError
from harness.core.records import read_records
from harness.runs.dry_run import estimate_run
from harness.runs.runner import Runner
from providers import provider_options
from providers.jury import combine

CANDIDATES = ["a", "b", "c"]


def test_mean_leaves_out_missing_scores() -> None:
    answers = [{"a": 1.0, "b": 4.0, "c": None}, {"a": 3.0, "b": 2.0, "c": None}, {}]
    assert combine("mean", answers, CANDIDATES) == {"a": 2.0, "b": 3.0, "c": None}


def test_borda_counts_the_candidates_ranked_below_ties_half() -> None:
    answers = [{"a": 9.0, "b": 5.0, "c": 5.0}, {"a": 1.0, "b": 7.0, "c": None}]
    # first: a above 2, b and c above 0 with one tie each (0.5); second: b 2, a 1, c (missing) 0
    assert combine("borda", answers, CANDIDATES) == {"a": 3.0, "b": 2.5, "c": 0.5}


def test_majority_is_the_share_of_top_picks_ties_split() -> None:
    answers = [{"a": 9.0, "b": 1.0, "c": 0.0}, {"a": 9.0, "b": 9.0, "c": 0.0}, {"c": 5.0}]
    assert combine("majority", answers, CANDIDATES) == pytest.approx(
        {"a": 1.5 / 3, "b": 0.5 / 3, "c": 1 / 3}
    )


def test_kemeny_is_the_ranking_nearest_the_members_rankings() -> None:
    """By hand: three members rank a > b > c, two rank b > c > a. Borda gives b 3x1 + 2x2 = 7
    over a's 3x2 = 6; but a beats b (3 to 2) and c (3 to 2) head to head, b beats c 5 to 0, so
    a > b > c agrees with 3 + 3 + 5 = 11 member pairs, more than any other of the 6 orders
    (b > a > c: 10). A candidate scores the number of candidates below it in that ranking."""
    answers = [{"a": 3.0, "b": 2.0, "c": 1.0}] * 3 + [{"a": 0.0, "b": 9.0, "c": 5.0}] * 2
    assert max(combine("borda", answers, CANDIDATES).items(), key=lambda kv: kv[1])[0] == "b"
    assert combine("kemeny", answers, CANDIDATES) == {"a": 2.0, "b": 1.0, "c": 0.0}


def test_kemeny_ties_share_the_positions_of_every_best_ranking() -> None:
    """A cycle (a > b > c, b > c > a, c > a > b): the three rotations agree with 5 member
    pairs each, the best there is, and each puts every candidate once in each place."""
    cycle = [{"a": 3.0, "b": 2.0, "c": 1.0}, {"a": 1.0, "b": 3.0, "c": 2.0}]
    cycle.append({"a": 2.0, "b": 1.0, "c": 3.0})
    assert combine("kemeny", cycle, CANDIDATES) == {"a": 1.0, "b": 1.0, "c": 1.0}
    four = ["a", "b", "c", "d"]  # 24 orders; one member alone is its own Kemeny ranking
    assert combine("kemeny", [{"a": 1.0, "b": 4.0, "c": 2.0, "d": 3.0}], four) == {
        "b": 3.0,
        "d": 2.0,
        "c": 1.0,
        "a": 0.0,
    }


@given(st.lists(st.lists(st.integers(0, 3), min_size=4, max_size=4), min_size=1, max_size=5))
def test_kemeny_agrees_with_the_unanimous_members(scores: list[list[int]]) -> None:
    """Members who all give the same scores: their ranking is the jury's, as Borda's is."""
    four = ["a", "b", "c", "d"]
    answers = [dict(zip(four, map(float, scores[0]), strict=True))] * len(scores)
    borda = combine("borda", answers, four)
    assert combine("kemeny", answers, four) == {c: v / len(scores) for c, v in borda.items()}


def test_no_usable_answer_scores_nothing() -> None:
    assert combine("borda", [{}, {"a": None}], CANDIDATES) == dict.fromkeys(CANDIDATES)


def test_a_member_must_be_a_judge(tiny_dataset: Path) -> None:
    with pytest.raises(ConfigError, match="members are judges, not 'random'"):
        provider_options({"name": "jury", "members": [{"name": "random"}, {"name": "mock"}]})


def members(dataset: Path) -> list[dict[str, Any]]:
    common = {"name": "simulated", "dataset": str(dataset), "temperature": 0.7}
    return [
        {**common, "label": "first", "position_bias": 1.0},
        {**common, "label": "agrees", "seed": 5},
    ]


def test_a_jury_after_its_members_makes_no_call(tiny_dataset: Path, tmp_path: Path) -> None:
    juror = members(tiny_dataset)
    sweep = {
        "name": "jury",
        "dataset": str(tiny_dataset),
        "providers": [*juror, {"name": "jury", "label": "jury", "members": juror}],
        "prompts": ["joint"],
        "prompt_options": {"order": "permuted", "squares": 1},
        "inputs": {"dialogue": "full", "music": "caption"},
        "repeats": 4,
        "n_bootstrap": 50,
    }
    options = {"results_dir": tmp_path / "results", "cache_dir": tmp_path / "cache"}
    made = harness.run(sweep, show_progress=False, **options)
    assert [r.stats.model_calls for r in made] == [12, 12, 0]  # 3 items x 4 orders each
    jury = made[-1]
    records = list(read_records(jury.out_dir / "records.jsonl"))
    assert all(r.cache_hit for r in records)
    for record in records:
        first, agrees = record.extra["members"]
        assert first["label"] == "first"
        assert first["scores"][record.candidates[0]] == 10.0  # its position bias
        borda = combine("borda", [first["scores"], agrees["scores"]], record.candidates)
        assert record.scores == borda
    comparison = (tmp_path / "results" / "jury" / "comparison.md").read_text()
    for run in ("simulated_first", "simulated_agrees", "jury_jury"):
        assert f"| {run}_joint_full_caption" in comparison
    again = harness.run(sweep, show_progress=False, only=["*jury*"], **options)
    assert [r.stats.model_calls for r in again] == [0]


def test_a_dry_run_counts_a_jury_whose_members_are_cached_as_cached(
    tiny_dataset: Path, tmp_path: Path
) -> None:
    juror = members(tiny_dataset)
    sweep = SweepConfig.model_validate(
        {
            "name": "jury",
            "dataset": str(tiny_dataset),
            "providers": [juror[0], {"name": "jury", "members": juror}],
            "prompts": ["joint"],
            "inputs": [{"dialogue": "full", "music": "caption"}],
        }
    )
    member, jury = sweep.expand()
    cache = ResponseCache(tmp_path / "cache")
    results = tmp_path / "results"

    def estimate(config: ExperimentConfig) -> tuple[int, int]:
        made = estimate_run(Runner(config, cache=cache, results_dir=results, show_progress=False))
        return made.requests, made.cached

    assert estimate(jury) == (3, 0)
    asyncio.run(Runner(member, cache=cache, results_dir=results, show_progress=False).run())
    assert estimate(jury) == (3, 0)  # one member's answers are not the jury's
    second = member.model_copy(update={"provider": provider_options(juror[1])})
    elsewhere = tmp_path / "second"
    asyncio.run(Runner(second, cache=cache, results_dir=elsewhere, show_progress=False).run())
    assert estimate(jury) == (3, 3)
    cache.close()


def test_each_member_is_priced_at_its_own_prices(tiny_dataset: Path, tmp_path: Path) -> None:
    juror = [
        {"name": "mock", "label": "cheap", "prices": {"input": 1.0, "output": 2.0}},
        {"name": "mock", "label": "dear", "seed": 1, "prices": {"input": 30.0, "output": 60.0}},
    ]
    sweep = {
        "name": "priced",
        "dataset": str(tiny_dataset),
        "providers": [*juror, {"name": "jury", "label": "jury", "members": juror}],
        "prompts": ["joint"],
        "inputs": {"dialogue": "full", "music": "caption"},
        "n_bootstrap": 10,
    }
    made = harness.run(
        sweep, show_progress=False, results_dir=tmp_path / "r", cache_dir=tmp_path / "c"
    )
    costs = [json.loads((run.out_dir / "run.json").read_text())["cost"] for run in made]
    cheap, dear, jury = costs
    assert 0 < cheap["usd"] < dear["usd"]
    assert jury["usd"] == pytest.approx(cheap["usd"] + dear["usd"])
    assert jury["usd_spent"] == 0  # every answer was its members'
    assert jury["usage"]["input_tokens"] == cheap["usage"]["input_tokens"] * 2
