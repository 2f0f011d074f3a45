"""The `jury` provider: its combinations of the members' scores, and a sweep where the jury
runs after its members: it makes no model call (every member's answer is in the cache under
the member's own key), its records keep each member's answer, and the comparison shows the
jury beside its members."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import harness
from harness.core.errors import ConfigError
from harness.core.records import read_records
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
