"""The popularity baseline: counts per group, its two tie-breaks, its place in the cache key,
and (when the MusiCRS release is present) the published row of MusiCRS reproduced exactly."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from harness.config.experiment import ExperimentConfig, provider_config
from harness.config.loading import load_experiments
from harness.core.dataset import Item
from harness.core.errors import ConfigError
from harness.core.types import ScoreCandidate, ScoreRequest
from providers.scorers.popularity import PopularityScorer
from tests.conftest import run_config, write_pool_dataset

REPO = Path(__file__).resolve().parents[3]
REALDATA = Path(os.environ.get("BGM_JUDGE_REALDATA", REPO.parent / "shared" / "realdata"))
RELEASE = REALDATA / "musicrs" / "musicrs_100_candidates.jsonl"


def item(item_id: str, group: str | None, candidates: list[str]) -> Item:
    return Item(id=item_id, query="q", group=group, candidates=tuple(candidates), relevant=())


ITEMS = [
    item("a", "jazz", ["x", "y", "z"]),
    item("b", "jazz", ["y", "z", "w"]),
    item("c", "jazz", ["z", "v"]),
    item("d", "metal", ["x", "z"]),
]


def score(tie_break: str, item_id: str, candidates: list[str]) -> list[float]:
    scorer = PopularityScorer(provider_config("popularity", tie_break=tie_break))
    scorer.fit(ITEMS)
    request = ScoreRequest(
        "q", tuple(ScoreCandidate(c, c, None) for c in candidates), "caption", item_id, 0
    )
    return asyncio.run(scorer.score(request))


def test_counts_within_the_items_group() -> None:
    assert score("none", "a", ["x", "y", "z"]) == [1.0, 2.0, 3.0]
    assert score("none", "d", ["x", "z"]) == [1.0, 1.0]  # metal counts only metal's lists


def test_order_breaks_ties_by_candidate_order_and_keeps_counts_apart() -> None:
    tied = score("order", "d", ["x", "z"])
    assert tied[0] > tied[1] and int(tied[0]) == 1 and tied[1] > 0.0
    ranked = score("order", "b", ["y", "z", "w"])
    assert sorted(range(3), key=lambda i: -ranked[i]) == [1, 0, 2]  # z (3), y (2), w (1)


def test_fit_digest_follows_the_counts() -> None:
    scorer = PopularityScorer(provider_config("popularity"))
    assert scorer.fit(ITEMS) == scorer.fit(list(ITEMS))
    assert scorer.fit(ITEMS) != scorer.fit(ITEMS[:3])


def test_options_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "exp.yaml"
    path.write_text("name: p\ndataset: d\nprovider: {name: popularity, tie_break: random}\n")
    with pytest.raises(ConfigError, match=r"provider\.tie_break"):
        load_experiments(path)


def run(tmp_path: Path, dataset: Path, **settings: Any) -> dict[str, Any]:
    config = ExperimentConfig.model_validate(
        {
            "name": "popularity",
            "dataset": str(dataset),
            "provider": {"name": "popularity", **settings.pop("provider", {})},
            "inputs": {"dialogue": "query", "music": "caption"},
            "metrics": {"at": [1, 5, 10, 20]},
            "n_bootstrap": 10,
            **settings,
        }
    )
    result, _ = run_config(config, tmp_path)
    assert result.complete
    metrics: dict[str, Any] = json.loads((result.out_dir / "metrics.json").read_text())
    metrics["model_calls"] = result.stats.model_calls
    return metrics


def test_a_run_is_cached_and_a_limited_run_counts_only_its_items(tmp_path: Path) -> None:
    pool = write_pool_dataset(tmp_path / "pool", 6, 30)
    first = run(tmp_path, pool)
    again = run(tmp_path, pool)
    assert again["model_calls"] == 0 and again["metrics"] == first["metrics"]
    assert first["tie_rate"] > 0  # shared titles tie
    limited = run(tmp_path, pool, limit=3, name="popularity_3")  # another configuration
    assert limited["model_calls"] == 3  # other counts: other answers, not the cached ones


@pytest.mark.slow
@pytest.mark.skipif(not RELEASE.is_file(), reason=f"MusiCRS release not found at {RELEASE}")
def test_reproduces_the_published_musicrs_row(tmp_path: Path) -> None:
    """MusiCRS's README: popularity baseline Recall@20 16.51%, nDCG@20 11.09%."""
    from harness.interop.musicrs import import_musicrs

    import_musicrs(RELEASE, tmp_path / "musicrs")
    merge = {"postrock": "indieheads", "ambientmusic": "jazz"}
    ordered = run(
        tmp_path / "order",
        tmp_path / "musicrs",
        provider={"tie_break": "order"},
        metrics={"at": [20], "merge_groups": merge},
    )
    percent = {k: round(100 * v["mean"], 2) for k, v in ordered["metrics"].items()}
    assert (percent["recall@20"], percent["ndcg@20"]) == (16.51, 11.09)
    assert ordered["tie_rate"] == 0.0 and ordered["n_items_without_relevant"] == 5
    assert sorted(ordered["groups"]) == [
        "classicalmusic", "electronicmusic", "hiphopheads", "indieheads", "jazz", "metal", "popheads"
    ]  # fmt: skip
    tied = run(tmp_path / "none", tmp_path / "musicrs", metrics={"at": [20]})
    expected = {k: round(100 * v["mean"], 2) for k, v in tied["metrics"].items()}
    assert (expected["recall@20"], expected["ndcg@20"]) == (16.11, 10.91)
