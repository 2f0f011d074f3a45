"""`protocol: refine`: two turns over a pool (a scorer offline; judges and the LLM user
through both SDKs against the fake API), the simulated user's replies, metrics per turn with
success@K, the dry run, and inputs refused before any call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.calls.cache import ResponseCache
from harness.config.experiment import ExperimentConfig, RefineOptions
from harness.config.loading import load_experiments
from harness.core.dataset import Clip, Item
from harness.core.errors import ConfigError, HarnessError
from harness.core.records import Record
from harness.fake_api import FakeServer
from harness.protocols.feedback import SATISFIED, aspect_feedback
from harness.protocols.refine import top_pick
from harness.runs.dry_run import estimate_run
from harness.runs.runner import Runner
from harness.scoring.evaluation import evaluate_records
from tests.conftest import run_config

pytestmark = [
    pytest.mark.filterwarnings("ignore:Inheritance class Aiohttp:DeprecationWarning"),
    pytest.mark.usefixtures("api_keys"),
]
N_ITEMS, POOL = 3, 30
ASPECTS = ["piano", "strings", "drums", "slow tempo", "fast tempo", "calm", "sad", "guitar"]


def write_refine_dataset(root: Path, n_items: int = N_ITEMS, pool: int = POOL) -> Path:
    """Single-gold pools of captioned clips with aspects, a query naming two gold aspects."""
    root.mkdir(parents=True, exist_ok=True)
    clips, items = [], []
    for j in range(pool + n_items):
        aspects = [ASPECTS[(j + k * 3) % len(ASPECTS)] for k in range(4)]
        clips.append(
            {"id": f"m{j}", "caption": f"A track with {', '.join(aspects)}.", "aspects": aspects}
        )
    for i in range(n_items):
        candidates = [f"m{j}" for j in range(i, i + pool)]
        gold = clips[i + 7]
        items.append(
            {
                "id": f"r{i}",
                "query": f"Recommend me some music: {gold['aspects'][0]}, {gold['aspects'][1]}.",
                "candidates": candidates,
                "relevant": [gold["id"]],
                "feedback": "Calmer, please, and no drums.",
            }
        )
    (root / "clips.jsonl").write_text("".join(json.dumps(c) + "\n" for c in clips))
    (root / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    return root


@pytest.fixture
def pool(tmp_path: Path) -> Path:
    return write_refine_dataset(tmp_path / "pool")


def config(dataset: Path, provider: dict[str, Any], **settings: Any) -> ExperimentConfig:
    return ExperimentConfig.model_validate(
        {
            "name": "refine",
            "dataset": str(dataset),
            "protocol": "refine",
            "provider": provider,
            "inputs": {"dialogue": "query", "music": "caption"},
            "metrics": {"at": [1, 5, 10]},
            "n_bootstrap": 50,
            **settings,
        }
    )


# ------------------------------------------------------------------ the simulated user
def _item(query: str | None = None) -> tuple[Item, dict[str, Clip]]:
    clips = {
        "g": Clip(id="g", caption="gold", aspects=("piano", "calm", "strings", "slow tempo")),
        "p": Clip(id="p", caption="pick", aspects=("drums", "calm", "fast tempo")),
    }
    item = Item(id="i", query=query or "music", candidates=("p", "g"), relevant=("g",))
    return item, clips


def test_the_aspect_user_names_what_the_gold_has_and_the_pick_lacks_and_the_reverse() -> None:
    item, clips = _item()
    options = RefineOptions()
    text = aspect_feedback(item, clips, "p", options)
    assert text == (
        "Not quite. I would like something with piano, strings and slow tempo, "
        "and without drums or fast tempo."
    )
    assert aspect_feedback(item, clips, "g", options) == SATISFIED
    wanted = aspect_feedback(item, clips, "p", RefineOptions(mention="wanted", max_aspects=1))
    assert wanted == "Not quite. I would like something with piano."
    unwanted = aspect_feedback(item, clips, "p", RefineOptions(mention="unwanted"))
    assert unwanted == "Not quite. I would like something without drums or fast tempo."


def test_the_aspect_user_does_not_repeat_what_the_query_said() -> None:
    item, clips = _item(query="Something with PIANO and strings")
    text = aspect_feedback(item, clips, "p", RefineOptions(mention="wanted"))
    assert text == "Not quite. I would like something with slow tempo."
    again = aspect_feedback(
        item, clips, "p", RefineOptions(mention="wanted", skip_query_aspects=False)
    )
    assert "piano" in again


def test_the_first_pick_is_the_top_score_and_the_earliest_among_ties() -> None:
    assert top_pick({"a": 1.0, "b": 3.0, "c": 3.0}, ("a", "c", "b")) == "c"
    assert top_pick({"a": None, "b": -2.0}, ("a", "b")) == "b"
    assert top_pick({"a": None}, ("a",)) is None


# ------------------------------------------------------------------ a scorer, end to end
def test_a_scorer_refines_with_the_reply_appended_to_its_query(tmp_path: Path, pool: Path) -> None:
    result, records = run_config(config(pool, {"name": "text-embedding"}), tmp_path)
    assert result.stats.errors == 0 and len(records) == 2 * N_ITEMS
    first = {r.item_id: r for r in records if r.extra["turn"] == 1}
    second = {r.item_id: r for r in records if r.extra["turn"] == 2}
    for item_id, record in second.items():
        assert record.extra["first_pick"] == top_pick(
            first[item_id].scores, tuple(first[item_id].candidates)
        )
        assert record.extra["feedback_source"] == "aspects" and record.extra["feedback"]
        assert record.scores != first[item_id].scores  # the query changed
    metrics = json.loads((result.out_dir / "metrics.json").read_text())
    assert [t["turn"] for t in metrics["turns"]] == [1, 2]
    assert metrics["metrics"]["recall@10"] == metrics["turns"][1]["metrics"]["recall@10"]
    assert {"success@1", "success@5", "success@10", "median_rank", "mean_rank"} <= set(
        metrics["metrics"]
    )
    for k in (1, 5, 10):
        success = metrics["metrics"][f"success@{k}"]["mean"]
        assert all(success >= t["metrics"][f"recall@{k}"]["mean"] for t in metrics["turns"])
    gain = metrics["turn_gain"]["recall@10"]["mean"]
    turns = metrics["turns"]
    expected = turns[1]["metrics"]["recall@10"]["mean"] - turns[0]["metrics"]["recall@10"]["mean"]
    assert gain == pytest.approx(expected, abs=1e-6) and "median_rank" not in metrics["turn_gain"]
    report = (result.out_dir / "report.md").read_text()
    assert "## Turns" in report and "SR@10" in report and "protocol: `refine`" in report
    predictions = [json.loads(line) for line in (result.out_dir / "predictions.jsonl").open()]
    assert predictions[0]["scores"] == second[predictions[0]["item_id"]].scores  # turn 2's
    again, _ = run_config(config(pool, {"name": "text-embedding"}), tmp_path)
    assert again.stats.model_calls == 0
    assert (again.out_dir / "metrics.json").read_text() == (
        result.out_dir / "metrics.json"
    ).read_text()


def test_the_items_own_feedback_is_the_reply(tmp_path: Path, pool: Path) -> None:
    _, records = run_config(
        config(pool, {"name": "random", "seed": 1}, refine={"feedback": "item"}), tmp_path
    )
    replies = {r.extra["feedback"] for r in records if r.extra["turn"] == 2}
    assert replies == {"Calmer, please, and no drums."}


def test_items_that_cannot_give_the_reply_are_refused_before_any_call(tmp_path: Path) -> None:
    data = write_refine_dataset(tmp_path / "bare")
    lines = [json.loads(line) for line in (data / "clips.jsonl").open()]
    lines[5]["aspects"] = []
    (data / "clips.jsonl").write_text("".join(json.dumps(c) + "\n" for c in lines))
    with pytest.raises(HarnessError, match=r"clip m5 \(item r0\) has no aspects"):
        run_config(config(data, {"name": "random"}), tmp_path)
    items = [json.loads(line) for line in (data / "items.jsonl").open()]
    del items[1]["feedback"]
    (data / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    with pytest.raises(HarnessError, match="item r1 has no feedback"):
        run_config(config(data, {"name": "random"}, refine={"feedback": "item"}), tmp_path)
    assert not (tmp_path / "results" / "refine" / "records.jsonl").exists()


def test_refine_settings_are_checked_when_the_file_loads(tmp_path: Path, pool: Path) -> None:
    def load(extra: str, inputs: str = "{dialogue: query, music: caption}") -> None:
        path = tmp_path / "exp.yaml"
        path.write_text(f"name: x\ndataset: {pool}\nprotocol: refine\ninputs: {inputs}\n" + extra)
        load_experiments(path)

    with pytest.raises(ConfigError, match="prompt joint has no second turn"):
        load("provider: {name: gemini}\nprompt: joint\n", inputs="{dialogue: full, music: caption}")
    with pytest.raises(ConfigError, match="needs a user_simulator"):
        load("provider: {name: random}\nrefine: {feedback: simulator}\n")
    with pytest.raises(ConfigError, match="user_simulator must be a judge"):
        load("provider: {name: random}\nuser_simulator: {name: random}\n")
    with pytest.raises(ConfigError, match="mention"):
        load("provider: {name: random}\nrefine: {mention: everything}\n")


# ------------------------------------------------------------------ success@K, by construction
def _records(turn: int, scores: list[list[float | None]], pools: list[list[str]]) -> list[Record]:
    return [
        Record(
            item_id=f"i{n}",
            candidates=pool,
            scores=dict(zip(pool, row, strict=True)),
            extra={"turn": turn},
        )
        for n, (row, pool) in enumerate(zip(scores, pools, strict=True))
    ]


score = st.one_of(st.none(), st.sampled_from([0.0, 0.5, 1.0, 2.0]), st.floats(-3, 3))


@st.composite
def two_turns(draw: st.DrawFn) -> tuple[list[Item], list[Record]]:
    n_items = draw(st.integers(1, 5))
    items, records = [], []
    for n in range(n_items):
        size = draw(st.integers(2, 12))
        pool = [f"c{n}_{j}" for j in range(size)]
        gold = draw(st.sampled_from(pool))
        items.append(Item(id=f"i{n}", query="q", candidates=tuple(pool), relevant=(gold,)))
        for turn in (1, 2):
            row = draw(st.lists(score, min_size=size, max_size=size))
            records += _records(turn, [row], [pool])
            records[-1] = records[-1].model_copy(update={"item_id": f"i{n}"})
    return items, records


@settings(max_examples=150, deadline=None)
@given(case=two_turns(), missing=st.sampled_from(["worst", "exclude"]))
def test_success_at_k_is_at_least_each_turns_recall_at_k(
    case: tuple[list[Item], list[Record]], missing: str
) -> None:
    items, records = case
    if missing == "exclude" and not any(
        all(v is not None for v in r.scores.values()) for r in records if r.extra["turn"] == 2
    ):
        return
    evaluation = evaluate_records(
        items,
        records,
        repeats=1,
        missing=missing,
        n_bootstrap=10,
        at=(1, 3, 5),  # type: ignore[arg-type]
    )
    by_turn = dict(evaluation.turns)
    for k in (1, 3, 5):
        success = evaluation.aggregate.per_item[f"success@{k}"]
        ids = evaluation.aggregate.item_ids
        for turn in (1, 2):
            agg = by_turn[turn]
            recall = dict(zip(agg.item_ids, agg.per_item[f"recall@{k}"], strict=True))
            for item_id, value in zip(ids, success, strict=True):
                if item_id in recall and np.isfinite(value):
                    assert value >= recall[item_id] - 1e-12
            mean = evaluation.aggregate.metrics[f"success@{k}"].mean
            if (
                mean is not None
                and agg.metrics[f"recall@{k}"].mean is not None
                and missing == "worst"
            ):
                assert mean >= agg.metrics[f"recall@{k}"].mean - 1e-9
        assert np.all((success >= 0) & (success <= 1) | np.isnan(success))


def test_success_is_one_minus_the_product_of_misses() -> None:
    """Gold tied with one other at the top in turn 1 (hit@1 = 1/2), at rank 2 in turn 2."""
    pool = ["g", "a", "b"]
    items = [Item(id="i0", query="q", candidates=tuple(pool), relevant=("g",))]
    records = _records(1, [[1.0, 1.0, 0.0]], [pool]) + _records(2, [[0.5, 1.0, 0.0]], [pool])
    evaluation = evaluate_records(items, records, repeats=1, n_bootstrap=10, at=(1, 2))
    metrics = evaluation.aggregate.metrics
    assert metrics["success@1"].mean == pytest.approx(0.5)
    assert metrics["success@2"].mean == pytest.approx(1.0)
    assert metrics["recall@1"].mean == 0.0  # the run's metrics are turn 2's


# ------------------------------------------------------------------ judges through both SDKs
def api(name: str, server: FakeServer) -> dict[str, Any]:
    block: dict[str, Any] = {"name": name, "max_concurrency": 4, "retry_wait_s": 0.02}
    if name == "gemini":
        return block | {"base_url": server.url}
    return block | {"model": "gpt-5-mini", "base_url": server.openai_base_url}


@pytest.mark.parametrize(("judge", "user"), [("gemini", "openai"), ("openai", "gemini")])
def test_a_judge_refines_after_an_llm_users_reply(
    tmp_path: Path, pool: Path, server: FakeServer, judge: str, user: str
) -> None:
    settings = {
        "prompt": "listwise",
        "prompt_options": {"order": "permuted"},
        "refine": {"feedback": "simulator"},
        "user_simulator": api(user, server),
    }
    result, records = run_config(config(pool, api(judge, server), **settings), tmp_path)
    assert result.stats.errors == 0 and result.stats.parse_failures == 0
    requests = server.requests()
    by_api = {a: [r for r in requests if r.api == a] for a in ("gemini", "openai")}
    judged, simulated = (
        by_api["gemini" if judge == "gemini" else "openai"],
        by_api["gemini" if user == "gemini" else "openai"],
    )
    assert len(judged) == 2 * N_ITEMS and len(simulated) == N_ITEMS
    assert all(r.json_mode == "schema" for r in requests)
    second = [r for r in records if r.extra["turn"] == 2]
    clips = {json.loads(line)["id"]: json.loads(line) for line in (pool / "clips.jsonl").open()}
    turn_two = [r for r in judged if "The listener replied" in r.user_text]
    assert len(turn_two) == N_ITEMS
    for record in second:
        assert record.extra["feedback_source"] == "simulator"
        assert record.extra["feedback"].startswith("Not quite.")
        shown = [r for r in turn_two if record.extra["feedback"] in r.user_text]
        assert shown and clips[record.extra["first_pick"]]["caption"] in shown[0].user_text
        assert len(record.extra["ranking"]) == POOL
    for entry in simulated:  # the user sees the target and the pick, not the pool
        assert "Clip 1:" not in entry.user_text and "The music you actually want" in entry.user_text
    run_json = json.loads((result.out_dir / "run.json").read_text())
    assert run_json["user_simulator"]["model_calls"] == N_ITEMS
    again, _ = run_config(config(pool, api(judge, server), **settings), tmp_path)
    assert again.stats.model_calls == 0 and len(server.requests()) == len(requests)


def test_the_dry_run_counts_both_turns_and_the_users_requests(
    tmp_path: Path, pool: Path, server: FakeServer
) -> None:
    settings = {
        "prompt": "listwise",
        "refine": {"feedback": "simulator"},
        "user_simulator": api("openai", server),
    }
    cfg = config(pool, api("gemini", server), **settings)
    rendered: list[dict[str, Any]] = []

    def estimate() -> tuple[int, int]:
        cache = ResponseCache(tmp_path / "cache")
        try:
            found = estimate_run(Runner(cfg, cache=cache, results_dir=tmp_path / "dry"))
        finally:
            cache.close()
        rendered.extend(found.rendered)
        return found.requests, found.cached

    assert estimate() == (3 * N_ITEMS, 0)  # turn 1, the user, turn 2 (from a placeholder)
    assert server.requests() == []
    run_config(cfg, tmp_path)
    assert estimate() == (2 * N_ITEMS, 2 * N_ITEMS)  # the replies are known: no user requests
    assert (
        sum("The listener replied" in line["user"] for line in rendered[-2 * N_ITEMS :]) == N_ITEMS
    )


def test_a_turn_one_without_scores_leaves_turn_two_unasked(tmp_path: Path, pool: Path) -> None:
    from harness.fake_api import FakeSettings

    with FakeServer(FakeSettings(answer="wrong_keys")) as server:
        block = api("gemini", server) | {"reask": 0}
        result, records = run_config(config(pool, block, prompt="listwise"), tmp_path)
        assert len(server.requests()) == N_ITEMS
    second = [r for r in records if r.extra["turn"] == 2]
    assert all(r.extra["skipped"] and set(r.scores.values()) == {None} for r in second)
    assert result.aggregate.coverage == 0.0


def test_the_musiccaps_experiment_file_loads_with_its_judges_uncommented(tmp_path: Path) -> None:
    source = Path(__file__).resolve().parents[3] / "experiments" / "refine_musiccaps.yaml"
    runs = load_experiments(source)
    assert [r.provider.name for r in runs] == ["text-embedding", "random"]
    assert all(r.protocol == "refine" and r.metrics.at == (1, 5, 10) for r in runs)
    opened = source.read_text().replace("  # - {name:", "  - {name:")
    path = tmp_path / "refine.yaml"
    path.write_text(opened)
    judges = [r for r in load_experiments(path) if r.kind == "judge"]
    assert [r.prompt for r in judges] == ["listwise", "listwise"]


def test_a_sweeps_comparison_has_the_turns(tmp_path: Path, pool: Path) -> None:
    import harness

    path = tmp_path / "sweep.yaml"
    path.write_text(
        f"name: sweep\ndataset: {pool}\nprotocol: refine\nn_bootstrap: 20\n"
        "providers: [{name: text-embedding}, {name: random, seed: 3}]\n"
        "inputs: [{dialogue: query, music: caption}]\nmetrics: {at: [5]}\n"
    )
    harness.run(path, results_dir=tmp_path, cache_dir=tmp_path / "cache", show_progress=False)
    text = (tmp_path / "sweep" / "comparison.md").read_text()
    assert "SR@5" in text.splitlines()[2]  # the table's header
    turns = text[text.index("## Turns") :]
    assert "| text-embedding_all-MiniLM-L6-v2_query_caption | R@5 |" in turns
    assert "| random_uniform_query_caption | SR@5 |" in turns


def test_an_unusable_reply_is_counted_as_unparsable_not_as_a_failed_call(
    tmp_path: Path, pool: Path
) -> None:
    from harness.fake_api import FakeSettings

    with (
        FakeServer(FakeSettings()) as judge_server,
        FakeServer(FakeSettings(answer="wrong_keys")) as user_server,
    ):
        settings = {
            "prompt": "listwise",
            "refine": {"feedback": "simulator"},
            "user_simulator": api("openai", user_server) | {"reask": 0},
        }
        result, records = run_config(
            config(pool, api("gemini", judge_server), **settings), tmp_path
        )
    second = [r for r in records if r.extra["turn"] == 2]
    assert all(r.parse_error and r.parse_error.startswith("user_simulator: ") for r in second)
    assert all(r.error is None and r.extra["feedback_raw"] for r in second)
    assert result.stats.errors == 0 and result.stats.parse_failures == N_ITEMS
