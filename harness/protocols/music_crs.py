"""`protocol: music-crs`, the RecSys Challenge 2026 Music-CRS task (docs/protocols/music_crs.md):
sessions (ground-truth or TalkPlayData rows; a session whose last turn has no `music` is blind)
and a submission read and checked, every problem one line; `official` scores as the organisers'
evaluator does. A judge run rates a seeded sample of responses (prompt `response_judge`)."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from harness.calls.prompting.parsing import RATINGS
from harness.core.dataset import Dataset
from harness.core.errors import HarnessError
from harness.core.files import read_json, read_jsonl, text_lines
from harness.core.items import Dialogue, Item, Turn
from harness.core.records import Record
from harness.scoring.evaluation import Evaluation
from harness.scoring.music_crs_metrics import MAX_IDS, Answer, Ratings, music_crs_evaluation

CATALOG_SIZE = 47_071  # TalkPlayData-Challenge-Track-Metadata, split all_tracks
SESSIONS_FILE = "sessions.jsonl"  # in a dataset folder (a Hugging Face dataset's rows)
MAX_VALUES = 4_000_000  # a devset file: 8,000 rows of some 30 values each
Key = tuple[str, int]


class MusicCrsOptions(BaseModel):
    """The `music-crs:` block of a judge run; `harness evaluate`'s options."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    predictions: Path = Field(description="the submission (its responses are judged)")
    sample: int | None = Field(default=None, ge=1, description="sessions judged [default: all]")
    catalog_size: int = Field(default=CATALOG_SIZE, ge=1)
    catalog: Path | None = Field(default=None, description="the catalog's track ids")
    official: bool = Field(default=False, description="as the organisers' evaluator scores")
    judge: float | None = Field(default=None, ge=1, le=5, description="a judge score known")


@dataclass(frozen=True)
class Target:
    """An asked turn: its gold track (None on a blind set) and what came before its response."""

    session: str
    turn: int
    gold: str | None = None
    context: tuple[Turn, ...] = ()  # the earlier turns and this turn's user message
    profile: Mapping[str, Any] | None = None  # the listener's


@dataclass(frozen=True)
class Prediction:
    row: int  # its place in the file, from 0
    session: str
    turn: int
    ids: tuple[str, ...]
    response: str | None  # None: missing or null

    @property
    def where(self) -> str:
        return f"row {self.row} (session {self.session}, turn {self.turn})"


@dataclass(frozen=True)
class Problem:
    line: str
    official: str | None  # what the organisers' evaluator does with it; None: it stops too

    def shown(self, official: bool) -> str:
        if not official:
            return self.line
        return f"{self.line}; the organisers' evaluator {self.official or 'stops here too'}"


# ---------------------------------------------------------------------------------- sessions
def _text(row: Mapping[str, Any], key: str) -> str:
    value = row.get(key)
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value:
        raise ValueError(f"{key} must be a non-empty string, not {value!r}")
    return value


def _turn(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"turn_number must be an integer >= 1, not {value!r}")
    return value


def _messages(value: Any) -> Iterator[Mapping[str, Any]]:
    """`conversations` as dicts (a struct of lists, as `datasets` may give it, too)."""
    if isinstance(value, Mapping):
        cells = zip(*value.values(), strict=True)
        value = [dict(zip(value, row, strict=True)) for row in cells]
    if not isinstance(value, list) or not all(isinstance(m, Mapping) for m in value):
        raise ValueError("conversations must be a list of {turn_number, role, content}")
    return iter(value)


def _session(row: Mapping[str, Any]) -> list[Target]:
    """The asked turns of a session row: each with `music`, or a blind set's last turn."""
    session, profile = _text(row, "session_id"), row.get("user_profile")
    profile = dict(profile) if isinstance(profile, Mapping) else None
    turns: dict[int, dict[str, str]] = {}
    for message in _messages(row.get("conversations")):
        role, content = _text(message, "role"), message.get("content")
        if not isinstance(content, str):
            raise ValueError(f"conversations: content must be a string, not {content!r}")
        turns.setdefault(_turn(message.get("turn_number")), {})[role] = content
    if not turns:
        raise ValueError("conversations is empty")
    last = max(turns)
    blind = "music" not in turns[last]
    targets, context = [], []
    for number in sorted(turns):
        parts = turns[number]
        if parts.get("user"):
            context.append(Turn("user", parts["user"]))
        if (number == last) if blind else ("music" in parts):
            targets.append(Target(session, number, parts.get("music"), (*context,), profile))
        if parts.get("assistant"):
            context.append(Turn("assistant", parts["assistant"]))
    return targets


def sessions_from_rows(rows: Iterable[tuple[str, Any]]) -> dict[Key, Target]:
    """The asked turns of (where, row) pairs: ground-truth rows or session rows, mixed."""
    targets: dict[Key, Target] = {}
    for where, row in rows:
        try:
            if not isinstance(row, Mapping):
                raise ValueError("expected a JSON object")
            if "ground_truth_track_id" in row:
                session, turn = _text(row, "session_id"), _turn(row.get("turn_number"))
                found = [Target(session, turn, _text(row, "ground_truth_track_id"))]
            else:
                found = _session(row)
        except (ValueError, TypeError) as exc:
            raise HarnessError(f"{where}: {exc}") from None
        for target in found:
            key = (target.session, target.turn)
            if key in targets:
                raise HarnessError(f"{where}: session {key[0]} turn {key[1]} given twice")
            targets[key] = target
    return targets


def read_sessions(path: Path) -> dict[Key, Target]:
    """A ground-truth or sessions JSON list, a sessions JSONL file, or a folder holding one."""
    path = path / SESSIONS_FILE if path.is_dir() else path
    if path.suffix == ".jsonl":
        targets = sessions_from_rows((f"{path}:{n}", row) for n, row in read_jsonl(path))
    else:
        targets = sessions_from_rows((f"{path} row {i}", row) for i, row in enumerate(_list(path)))
    if not targets:
        raise HarnessError(f"{path}: no sessions")
    return targets


def _list(path: Path) -> list[Any]:
    value = read_json(path, max_values=MAX_VALUES)
    if not isinstance(value, list):
        raise HarnessError(f"{path}: expected a JSON list of rows, not {type(value).__name__}")
    return value


def read_catalog(path: Path) -> frozenset[str]:
    """Track ids: a JSON list, or one per line."""
    if path.suffix == ".json":
        ids = frozenset(map(str, _list(path)))
    else:
        ids = frozenset(line.strip() for _, line in text_lines(path))
    if not ids:  # (every recommended track would be "not in the catalog")
        raise HarnessError(f"{path}: no track ids in the catalog")
    return ids


# ------------------------------------------------------------------------------- submission
def read_submission(path: Path) -> tuple[list[Prediction], list[Problem]]:
    """The rows of a submission, and a problem for each row that is not one."""
    predictions, problems = [], []
    for index, row in enumerate(_list(path)):
        try:
            if not isinstance(row, Mapping):
                raise ValueError("expected a JSON object")
            ids = row.get("predicted_track_ids")
            if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
                raise ValueError("predicted_track_ids must be a list of track ids (strings)")
            response = row.get("predicted_response")
            if response is not None and not isinstance(response, str):
                raise ValueError(f"predicted_response must be a string, not {response!r}")
            session, turn = _text(row, "session_id"), _turn(row.get("turn_number"))
        except ValueError as exc:
            problems.append(Problem(f"row {index}: {exc}", None))
            continue
        predictions.append(Prediction(index, session, turn, tuple(ids), response))
    return predictions, problems


def validate(
    predictions: Sequence[Prediction],
    asked: Mapping[Key, Target] | None,
    catalog: frozenset[str] | None = None,
) -> tuple[dict[Key, Prediction], list[Problem]]:
    """The row of each asked turn (the first where there are several) and every problem."""
    chosen: dict[Key, Prediction] = {}
    problems: list[Problem] = []
    for p in predictions:
        key = (p.session, p.turn)
        if key in chosen:
            line = f"{p.where}: a second row (first: row {chosen[key].row})"
            problems.append(Problem(line, "uses the first"))
            continue
        if asked is not None and key not in asked:
            problems.append(Problem(f"{p.where}: not an asked turn of the dataset", "ignores it"))
            continue
        chosen[key] = p
        repeated = sorted(i for i, n in Counter(p.ids).items() if n > 1)
        if repeated:
            problems.append(Problem(f"{p.where}: track id(s) listed twice: {repeated[:3]}", None))
        if len(p.ids) > MAX_IDS:
            line = f"{p.where}: {len(p.ids)} track ids; at most {MAX_IDS}"
            problems.append(Problem(line, "counts them all for catalog diversity"))
        unknown = sorted(set(p.ids) - catalog) if catalog is not None else []
        if unknown:
            line = f"{p.where}: {len(unknown)} id(s) not in the catalog: {unknown[:3]}"
            problems.append(Problem(line, "counts them for catalog diversity"))
        if p.response is None:  # the organisers' Distinct-2 lower-cases it: it stops
            problems.append(Problem(f"{p.where}: predicted_response missing or null", None))
    for key in asked or ():
        if key not in chosen:
            problems.append(Problem(f"session {key[0]}, turn {key[1]}: no prediction", None))
    return chosen, problems


def answers(options: MusicCrsOptions, dataset: Path | None) -> tuple[list[Answer], list[str]]:
    """Each asked turn's answer (each row's, without a dataset) and the problems `official`
    lets through; HarnessError when it cannot be scored."""
    asked = read_sessions(dataset) if dataset is not None else None
    catalog = read_catalog(options.catalog) if options.catalog is not None else None
    predictions, problems = read_submission(options.predictions)
    chosen, more = validate(predictions, asked, catalog)
    problems += more
    if problems and not (options.official and all(p.official for p in problems)):
        lines = [f"{options.predictions}: {p.shown(options.official)}" for p in problems]
        hint = "" if options.official else " (official: true scores it as the organisers do)"
        lines.append(f"{len(problems)} problem(s) in the submission{hint}")
        raise HarnessError("\n".join(lines))
    golds = {key: t.gold for key, t in asked.items()} if asked else dict.fromkeys(chosen)
    out = [Answer(*key, gold, chosen[key].ids, chosen[key].response) for key, gold in golds.items()]
    return out, [p.shown(True) for p in problems]


def evaluate(
    options: MusicCrsOptions,
    dataset: Path | None,
    records: Iterable[Record] = (),
    *,
    n_bootstrap: int = 1000,
    seed: int = 0,
) -> Evaluation:
    """The submission's figures (`harness evaluate`) with a judge run's ratings, if any."""
    given, problems = answers(options, dataset)
    ratings, size, judge = ratings_of(records), options.catalog_size, options.judge
    evaluation = music_crs_evaluation(
        given, catalog_size=size, ratings=ratings, judge=judge, n_bootstrap=n_bootstrap, seed=seed
    )
    if problems:
        evaluation.blocks["validation"] = problems
    return evaluation


def judged_dataset(options: MusicCrsOptions, dataset: Path, *, seed: int = 0) -> Dataset:
    """A judge run's items: the non-empty responses of `sample` sessions drawn with `seed`
    (all of them by default), each with the dialogue before it and the listener's profile."""
    asked = read_sessions(dataset)
    if not any(t.context for t in asked.values()):
        raise HarnessError(
            f"{dataset}: the response judge reads each session's dialogue; these sessions have "
            "none (a ground-truth file): give the sessions (TalkPlayData rows, sessions.jsonl)"
        )
    given = {(a.session, a.turn): a for a in answers(options, dataset)[0]}
    names = sorted({session for session, _ in asked})
    if options.sample is not None and options.sample < len(names):
        names = random.Random(seed).sample(names, options.sample)
    drawn = set(names)
    items = tuple(
        Item.model_construct(
            id=f"{t.session}#{t.turn}",
            dialogue=Dialogue(t.context),
            response=given[key].response,
            profile=dict(t.profile or {}),
        )
        for key, t in asked.items()
        if t.session in drawn and (given[key].response or "").strip()
    )
    if not items:
        raise HarnessError(f"{options.predictions}: no response to judge in the sessions drawn")
    return Dataset(root=dataset if dataset.is_dir() else dataset.parent, items=items, clips={})


def ratings_of(records: Iterable[Record]) -> Ratings | None:
    """The judge's ratings by repeat and session (the mean over its turns), if any."""
    rated = [
        (r.repeat, r.item_id.rpartition("#")[0], [r.extra[name] for name in RATINGS])
        for r in records
        if all(isinstance(r.extra.get(name), int) for name in RATINGS)
    ]
    if not rated:
        return None
    column = {session: j for j, session in enumerate(sorted({s for _, s, _ in rated}))}
    sums = np.zeros((len(RATINGS), max(r for r, _, _ in rated) + 1, len(column)))
    counts = np.zeros(sums.shape[1:])
    for repeat, session, values in rated:
        sums[:, repeat, column[session]] += values
        counts[repeat, column[session]] += 1
    with np.errstate(invalid="ignore"):  # NaN where a repeat has no rating of a session
        personalization, explanation_quality = sums / counts
    return Ratings(personalization, explanation_quality)


def trec_lines(
    options: MusicCrsOptions, dataset: Path | None, tag: str
) -> tuple[list[str], list[str]]:
    """A submission as TREC run lines, a query `SESSION#TURN` per asked turn, its tracks in the
    list's order with scores N - rank + 1 (never equal, so every tool keeps that order), and the
    qrels: each gold with gain 1 (none on a blind set)."""
    run, qrels = [], []
    for answer in answers(options, dataset)[0]:
        query, ids = f"{answer.session}#{answer.turn}", answer.ids[:MAX_IDS]
        run += [f"{query} Q0 {doc} {r} {len(ids) - r + 1} {tag}\n" for r, doc in enumerate(ids, 1)]
        qrels += [f"{query} 0 {answer.gold} 1\n"] if answer.gold is not None else []
    return run, qrels
