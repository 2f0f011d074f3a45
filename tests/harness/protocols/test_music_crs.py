"""`protocol: music-crs` (RecSys Challenge 2026 Music-CRS): sessions in every form, every
validation case of a submission (and what `official` does with it), nDCG over turn means
against the closed form, the two diversities, the composite, a blind set without nDCG; on the
real devset ground truth and the organisers' Blind-A baseline file where ../shared has them."""

from __future__ import annotations

import itertools
import json
import math
import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core.errors import HarnessError
from harness.protocols.music_crs import (
    MusicCrsOptions,
    evaluate,
    read_sessions,
    sessions_from_rows,
)
from harness.scoring.music_crs_metrics import Answer, distinct_2, music_crs_evaluation

REPO = Path(__file__).resolve().parents[3]
REALDATA = Path(os.environ.get("BGM_JUDGE_REALDATA", REPO.parent / "shared" / "realdata"))
CHALLENGE = REALDATA / "musiccrs2026"
needs_realdata = pytest.mark.skipif(
    not (CHALLENGE / "devset_ground_truth.json").is_file(),
    reason=f"the Music-CRS files are not at {CHALLENGE} (set BGM_JUDGE_REALDATA)",
)


def session_row(i: int, turns: int = 3, *, blind: bool = False) -> dict[str, Any]:
    """A session in TalkPlayData's row form; a blind one's last turn has no music row."""
    conversation = []
    for t in range(1, turns + 1):
        conversation.append({"turn_number": t, "role": "user", "content": f"u{i}.{t}"})
        if not (blind and t == turns):
            conversation.append({"turn_number": t, "role": "music", "content": f"g{i}.{t}"})
            conversation.append({"turn_number": t, "role": "assistant", "content": f"a{i}.{t}"})
    profile = {"age_group": "20s", "country_name": "Chile"}
    return {"session_id": f"s{i}", "user_id": f"u{i}", "user_profile": profile,
            "conversations": conversation}  # fmt: skip


def prediction(session: str, turn: int, gold: str, rank: int | None) -> dict[str, Any]:
    """20 ids with the gold at `rank` (None: absent)."""
    ids = [f"{session}.{turn}.x{j}" for j in range(20)]
    if rank is not None:
        ids[rank - 1] = gold
    return {"session_id": session, "user_id": "u", "turn_number": turn,
            "predicted_track_ids": ids, "predicted_response": f"a song for {session} turn {turn}"}  # fmt: skip


def write(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value))
    return path


@pytest.fixture
def sessions_file(tmp_path: Path) -> Path:
    path = tmp_path / "sessions.jsonl"
    path.write_text("".join(json.dumps(session_row(i)) + "\n" for i in range(4)))
    return path


def clean(ranks: Callable[[int, int], int | None] = lambda i, t: (i + t) % 4 or None) -> list[Any]:
    return [prediction(f"s{i}", t, f"g{i}.{t}", ranks(i, t)) for i in range(4) for t in (1, 2, 3)]


def score(tmp_path: Path, rows: list[Any], dataset: Path | None, **options: Any) -> dict[str, Any]:
    predictions = write(tmp_path / "predictions.json", rows)
    given = MusicCrsOptions(predictions=predictions, **options)
    return evaluate(given, dataset, n_bootstrap=50).to_json()


# ------------------------------------------------------------------------------- sessions
def test_sessions_of_every_form_say_the_asked_turns_their_gold_and_context(tmp_path: Path) -> None:
    truth = [{"session_id": "s0", "user_id": "u0", "turn_number": t, "ground_truth_track_id": f"g{t}"}
             for t in (1, 2)]  # fmt: skip
    from_truth = read_sessions(write(tmp_path / "truth.json", truth))
    assert [(t.session, t.turn, t.gold, t.context) for t in from_truth.values()] == [
        ("s0", 1, "g1", ()),
        ("s0", 2, "g2", ()),
    ]
    rows = sessions_from_rows([("row 0", session_row(0)), ("row 1", session_row(1, blind=True))])
    asked = rows
    assert sorted(asked) == [("s0", 1), ("s0", 2), ("s0", 3), ("s1", 3)]  # blind: its last turn
    assert asked["s1", 3].gold is None and asked["s0", 2].gold == "g0.2"
    context = [(turn.speaker, turn.text) for turn in asked["s0", 2].context]
    assert context == [("user", "u0.1"), ("assistant", "a0.1"), ("user", "u0.2")]
    assert rows["s0", 1].profile == {"age_group": "20s", "country_name": "Chile"}
    # `datasets` may hand a list of structs over as a struct of lists
    row = session_row(2)
    messages = row["conversations"]
    row["conversations"] = {key: [m[key] for m in messages] for key in messages[0]}
    assert [t.gold for t in sessions_from_rows([("r", row)]).values()] == ["g2.1", "g2.2", "g2.3"]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"session_id": "s", "turn_number": 0, "ground_truth_track_id": "g"}, "turn_number"),
        ({"session_id": "", "conversations": []}, "session_id"),
        ({"session_id": "s", "conversations": []}, "conversations is empty"),
        ({"session_id": "s", "conversations": [{"turn_number": 1, "role": "user"}]}, "content"),
    ],
)
def test_a_bad_session_row_is_one_line_naming_it(row: dict[str, Any], message: str) -> None:
    with pytest.raises(HarnessError, match=f"^data.json row 3: .*{message}"):
        sessions_from_rows([("data.json row 3", row)])


@pytest.mark.parametrize("name", ["sessions.jsonl", "truth.json", "catalog.txt", "catalog.json"])
def test_an_empty_sessions_or_catalog_file_is_one_line_naming_it(tmp_path: Path, name: str) -> None:
    from harness.protocols.music_crs import read_catalog

    path = tmp_path / name
    path.write_text("[]" if name.endswith(".json") else "")
    read = read_catalog if name.startswith("catalog") else read_sessions
    with pytest.raises(HarnessError, match=f"^{path}: no "):
        read(path)


# ---------------------------------------------------------------------------------- figures
def test_ndcg_is_the_mean_over_turn_means_of_the_closed_form(
    tmp_path: Path, sessions_file: Path
) -> None:
    def rank(i: int, t: int) -> int | None:
        return (i + t) % 4 or None

    metrics = score(tmp_path, clean(rank), sessions_file)
    for k in (1, 10, 20):
        per_turn = [
            np.mean([1 / math.log2(r + 1) if (r := rank(i, t)) and r <= k else 0 for i in range(4)])
            for t in (1, 2, 3)
        ]
        assert metrics["official"][f"ndcg@{k}"] == pytest.approx(np.mean(per_turn), abs=1e-12)
        assert [turn["metrics"][f"ndcg@{k}"]["mean"] for turn in metrics["turns"]] == [
            round(float(x), 6) for x in per_turn
        ]
        low, high = metrics["metrics"][f"ndcg@{k}"]["ci95"]
        assert low <= metrics["metrics"][f"ndcg@{k}"]["mean"] <= high
    assert "plain_mean" not in metrics  # every session has every turn: the two means agree
    assert metrics["n_items"] == 4 and [t["n_items"] for t in metrics["turns"]] == [4, 4, 4]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 3), st.one_of(st.none(), st.integers(1, 25))),
        min_size=1,
        max_size=12,
    )
)
def test_uneven_turns_give_the_turn_mean_and_the_plain_mean(
    asked: list[tuple[int, int | None]],
) -> None:
    answers = []
    for i, (turn, rank) in enumerate(asked):  # one session per row, as on a blind set
        ids = tuple(f"x{j}" for j in range(20))
        if rank is not None and rank <= 20:
            ids = (*ids[: rank - 1], "gold", *ids[rank:])
        answers.append(Answer(f"s{i}", turn, "gold", ids, "some words here"))
    evaluation = music_crs_evaluation(answers, catalog_size=100, n_bootstrap=20)
    metrics = evaluation.to_json()
    for k in (1, 10, 20):
        gains = {t: [] for t, _ in asked}
        for turn, rank in asked:
            gains[turn].append(1 / math.log2(rank + 1) if rank and rank <= k else 0.0)
        macro = np.mean([np.mean(v) for v in gains.values()])
        plain = np.mean([g for v in gains.values() for g in v])
        assert metrics["official"][f"ndcg@{k}"] == pytest.approx(macro, abs=1e-12)
        uneven = len({len(v) for v in gains.values()}) > 1
        assert ("plain_mean" in metrics) == uneven
        if uneven:
            assert metrics["plain_mean"][f"ndcg@{k}"]["mean"] == round(float(plain), 6)


def test_distinct_2_counts_bigrams_within_each_response_lower_cased() -> None:
    # (a b) (b c) | (a b) (b d) | one word: none | empty, None: none
    assert distinct_2(["A b c", "a  B d", "alone", "", None]) == 3 / 4
    assert distinct_2(["one", None]) is None


def test_catalog_diversity_lexical_diversity_and_the_composite(
    tmp_path: Path, sessions_file: Path
) -> None:
    rows = clean()
    metrics = score(tmp_path, rows, sessions_file, catalog_size=1000, judge=4.0)
    official = metrics["official"]
    distinct = {i for row in rows for i in row["predicted_track_ids"]}
    assert official["catalog_diversity"] == len(distinct) / 1000
    assert official["lexical_diversity"] == distinct_2(r["predicted_response"] for r in rows)
    expected = (
        0.5 * official["ndcg@20"]
        + 0.1 * official["catalog_diversity"]
        + 0.1 * official["lexical_diversity"]
        + 0.3 * (4.0 - 1) / 4
    )
    assert official["composite"] == pytest.approx(expected, abs=1e-15)
    assert metrics["metrics"]["judge"]["mean"] == 4.0
    low, high = metrics["metrics"]["composite"]["ci95"]
    assert low <= metrics["metrics"]["composite"]["mean"] <= high
    assert official["total_catalog_size"] == 1000
    assert metrics["metrics"]["catalog_diversity"]["ci95"] is None  # a count, not a mean
    assert "composite" not in score(tmp_path, rows, sessions_file)["metrics"]  # no judge score


def test_a_blind_set_has_diversity_and_no_ndcg_keys(tmp_path: Path) -> None:
    sessions = tmp_path / "blind.jsonl"
    sessions.write_text(
        "".join(json.dumps(session_row(i, i + 1, blind=True)) + "\n" for i in range(3))
    )
    rows = [prediction(f"s{i}", i + 1, "?", None) for i in range(3)]
    metrics = score(tmp_path, rows, sessions, judge=3.0)
    assert set(metrics["metrics"]) == {"catalog_diversity", "lexical_diversity", "judge"}
    assert set(metrics["official"]) == {
        "catalog_diversity",
        "lexical_diversity",
        "total_catalog_size",
    }
    assert "turns" not in metrics and metrics["n_items"] == 3
    # without any dataset: every row of the file counts
    assert score(tmp_path, rows, None)["official"] == metrics["official"]


# ------------------------------------------------------------------------------- validation
def _drop_response(rows: list[Any]) -> None:
    del rows[0]["predicted_response"]


CASES: dict[str, tuple[Callable[[list[Any]], Any], str, str | None]] = {
    # case: (how the clean file is spoiled, the line, what --official does; None: refuses too)
    "missing turn": (lambda rows: rows.pop(4), "session s1, turn 2: no prediction", None),
    "duplicate row": (
        lambda rows: rows.append(dict(rows[0], predicted_track_ids=["z"])),
        "row 12 (session s0, turn 1): a second row (first: row 0)",
        "uses the first",
    ),
    "duplicate id": (
        lambda rows: rows[1]["predicted_track_ids"].__setitem__(5, "s0.2.x0"),
        "row 1 (session s0, turn 2): track id(s) listed twice: ['s0.2.x0']",
        None,
    ),
    "more than 20": (
        lambda rows: rows[2]["predicted_track_ids"].append("extra"),
        "row 2 (session s0, turn 3): 21 track ids; at most 20",
        "counts them all for catalog diversity",
    ),
    "unknown ids": (
        lambda rows: rows[3]["predicted_track_ids"].__setitem__(19, "not-a-track"),
        "row 3 (session s1, turn 1): 1 id(s) not in the catalog: ['not-a-track']",
        "counts them for catalog diversity",
    ),
    "missing response": (
        _drop_response,
        "row 0 (session s0, turn 1): predicted_response missing or null",
        None,  # its Distinct-2 lower-cases every response: None and NaN stop it
    ),
    "null response": (
        lambda rows: rows[5].__setitem__("predicted_response", None),
        "row 5 (session s1, turn 3): predicted_response missing or null",
        None,
    ),
    "not asked": (
        lambda rows: rows.append(prediction("s9", 1, "g", 1)),
        "row 12 (session s9, turn 1): not an asked turn of the dataset",
        "ignores it",
    ),
    "not a row": (
        lambda rows: rows[6].__setitem__("predicted_track_ids", "s2.1.x0"),
        "row 6: predicted_track_ids must be a list of track ids (strings)",
        None,
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_problem_is_one_line_and_official_scores_it_as_the_organisers_do(
    tmp_path: Path, sessions_file: Path, case: str
) -> None:
    spoil, line, official = CASES[case]
    rows = clean()
    catalog = write(
        tmp_path / "catalog.json", sorted({i for r in rows for i in r["predicted_track_ids"]})
    )
    spoil(rows)
    options = {"catalog": catalog} if case == "unknown ids" else {}
    with pytest.raises(HarnessError) as refused:
        score(tmp_path, rows, sessions_file, **options)
    lines = str(refused.value).splitlines()
    assert lines[0] == f"{tmp_path / 'predictions.json'}: {line}"
    n = 2 if case == "not a row" else 1  # a row that is not one leaves its turn unanswered
    assert (
        lines[-1]
        == f"{n} problem(s) in the submission (official: true scores it as the organisers do)"
    )
    if official is None:
        with pytest.raises(HarnessError, match="the organisers' evaluator stops here too"):
            score(tmp_path, rows, sessions_file, official=True, **options)
        return
    metrics = score(tmp_path, rows, sessions_file, official=True, **options)
    assert metrics["validation"] == [f"{line}; the organisers' evaluator {official}"]
    if case == "more than 20":  # the 21st id counts for the catalog, not for nDCG@20
        assert metrics["official"]["catalog_diversity"] == (12 * 20 + 1) / 47071


def test_a_clean_file_has_no_validation_block(tmp_path: Path, sessions_file: Path) -> None:
    assert "validation" not in score(tmp_path, clean(), sessions_file)


# --------------------------------------------------------------------------------- real data
@needs_realdata
def test_devset_ndcg_at_known_ranks_equals_the_closed_form(tmp_path: Path) -> None:
    """Synthetic predictions on the real devset ground truth: each turn's gold at a rank
    drawn from a seeded generator (or absent)."""
    truth = json.loads((CHALLENGE / "devset_ground_truth.json").read_text())
    draw = random.Random(46)
    rows, ranks = [], {}
    for row in truth:
        rank = draw.choice([1, 2, 3, 7, 10, 11, 15, 20, None])
        key = (row["session_id"], row["turn_number"])
        ranks[key] = rank
        rows.append(prediction(*key, row["ground_truth_track_id"], rank))
    metrics = score(tmp_path, rows, CHALLENGE / "devset_ground_truth.json")
    assert metrics["n_items"] == 1000 and len(metrics["turns"]) == 8
    for k in (1, 10, 20):
        by_turn: dict[int, list[float]] = {}
        for (_, turn), rank in ranks.items():
            by_turn.setdefault(turn, []).append(
                1 / math.log2(rank + 1) if rank and rank <= k else 0
            )
        closed = sum(sum(v) / len(v) for v in by_turn.values()) / len(by_turn)
        assert abs(metrics["official"][f"ndcg@{k}"] - closed) <= 1e-12


@needs_realdata
def test_the_organisers_blind_a_baseline_file_evaluates_with_its_diversity(tmp_path: Path) -> None:
    path = CHALLENGE / "llama1b_bm25_blindset_A.json"
    rows = json.loads(path.read_text())
    metrics = evaluate(MusicCrsOptions(predictions=path), None, n_bootstrap=50).to_json()
    distinct = {i for row in rows for i in row["predicted_track_ids"]}
    assert metrics["official"]["catalog_diversity"] == len(distinct) / 47071
    bigrams = [
        pair
        for row in rows
        for words in [row["predicted_response"].lower().split()]
        for pair in itertools.pairwise(words)
    ]
    assert metrics["official"]["lexical_diversity"] == len(set(bigrams)) / len(bigrams)
    assert not any(name.startswith("ndcg") for name in metrics["metrics"])  # a blind set
    assert metrics["n_items"] == 80 and "validation" not in metrics
