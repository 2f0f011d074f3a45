"""What the HTML dialogue browser shows of the protocols, per item and run: a refine run's
pick at each turn (with the gold's rank) and the user's reply between them; a describe run's
description beside the caption of the item's most relevant candidate (the reference)."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.core.dataset import Clip, Item
from harness.core.records import Record
from harness.reports.loading import RunData


@dataclass
class TurnView:
    turn: int
    pick: str | None
    pick_caption: str
    gold_rank: float | None  # expected rank of the gold (ties broken at random)


@dataclass
class ProtocolView:
    """One run's conversation or description for one item (first repeat)."""

    run: str
    turns: list[TurnView] = field(default_factory=list)
    feedback: str | None = None
    feedback_source: str | None = None
    description: str | None = None
    references: list[str] = field(default_factory=list)
    cosine: float | None = None


def _best(relevance: dict[str, float]) -> list[str]:
    top = max(relevance.values())
    return [cid for cid, gain in relevance.items() if gain == top]


def expected_rank(scores: dict[str, float | None], cid: str) -> float | None:
    """The rank of `cid` by score (missing scores last, tied), ties broken at random."""
    low = float("-inf")
    mine = scores.get(cid)
    value = low if mine is None else mine
    others = [low if v is None else v for c, v in scores.items() if c != cid]
    if not scores:
        return None
    higher = sum(v > value for v in others)
    tied = sum(v == value for v in others)
    return 1 + higher + tied / 2


def _pick(record: Record, item: Item) -> str | None:
    usable = {c: v for c, v in record.scores.items() if v is not None}
    if not usable:
        return None
    best = max(usable.values())
    return next(c for c in item.candidates if usable.get(c) == best)


def protocol_view(run: RunData, records: list[Record], item: Item) -> ProtocolView | None:
    """The view of `run` on `item` from its records (repeat 0), or None when the run is
    neither a refine nor a describe run."""
    clips: dict[str, Clip] = run.dataset.clips
    first = [r for r in records if r.repeat == 0]
    turns = sorted((r for r in first if "turn" in r.extra), key=lambda r: int(r.extra["turn"]))
    gold = _best(item.relevance)
    if turns:
        view = ProtocolView(run.label)
        for record in turns:
            pick = _pick(record, item)
            caption = clips[pick].text if pick else ""
            ranks = [expected_rank(record.scores, g) for g in gold]
            known = [r for r in ranks if r is not None]
            view.turns.append(
                TurnView(int(record.extra["turn"]), pick, caption, min(known) if known else None)
            )
            if record.extra.get("feedback"):
                view.feedback = str(record.extra["feedback"])
                view.feedback_source = str(record.extra.get("feedback_source") or "")
        return view
    described = [r for r in first if isinstance(r.extra.get("description"), str)]
    if not described:
        return None
    cosine = described[0].extra.get("reference_cosine")
    return ProtocolView(
        run.label,
        description=str(described[0].extra["description"]),
        references=[clips[cid].text for cid in gold],
        cosine=float(cosine) if isinstance(cosine, int | float) else None,
    )
