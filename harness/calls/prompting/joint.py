"""Joint prompts (all clips in one request): clip labels, and the presentation order, `fixed` or
`permuted`: repeats 0..N-1 take the rows of one seeded cyclic Latin square (each candidate in
each position once), each further N a fresh square (or, with `squares: K`, the first K again)."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from harness.calls.prompting.fewshot import read_options

Order = Literal["fixed", "permuted"]
SCORE: dict[str, Any] = {"type": "number", "minimum": 0, "maximum": 10}


def clip_labels(count: int) -> list[str]:
    """How the clips of one prompt are named, in presentation order."""
    return [f"Clip {i + 1}" for i in range(count)] if count > 1 else ["Clip"]


def presentation_order(
    candidates: Sequence[str],
    order: Order,
    *,
    seed: int,
    item_id: str,
    repeat: int,
    squares: int | None = None,
) -> list[str]:
    """The order of repeat `repeat`; with `squares`, the repeats go round that many squares."""
    if order == "fixed":
        return list(candidates)
    n = len(candidates)
    block, row = divmod(repeat, n)
    if squares is not None:
        block %= squares
    square = latin_square(candidates, seed=seed, item_id=item_id, block=block)
    return square[row]


# Draws of a base order before a block accepts one whose rows another block already showed.
_FRESH_DRAWS = 64


def latin_square(
    candidates: Sequence[str], *, seed: int, item_id: str, block: int
) -> list[list[str]]:
    """The rows of block `block` of an item: the N rotations of a seeded base order (its
    rotations unlike earlier blocks' while (N-1)! classes last), in a seeded order. A string
    seed is hashed with SHA-512 by `random`: the squares are stable across runs."""
    used: set[tuple[str, ...]] = set()
    rows: list[list[str]] = []
    for index in range(block + 1):
        rng = random.Random(f"{seed}:{item_id}:square:{index}")
        base = rng.sample(list(candidates), len(candidates))
        for _ in range(_FRESH_DRAWS):
            if _rotation_class(base) not in used:
                break
            base = rng.sample(list(candidates), len(candidates))
        used.add(_rotation_class(base))
        rows = [base[k:] + base[:k] for k in range(len(base))]
        rng.shuffle(rows)
    return rows


def _rotation_class(order: Sequence[str]) -> tuple[str, ...]:
    """The same tuple for every rotation of `order` (the rotation starting at its least id)."""
    start = order.index(min(order))
    return tuple(order[start:]) + tuple(order[:start])


def joint_schema(
    labels: list[str], answer: Literal["scores", "ranking"], *, partial: bool = False
) -> dict[str, Any]:
    if answer == "ranking":
        ranking = {
            "type": "array",
            "items": {"type": "string", "enum": labels},
            "minItems": 1 if partial else len(labels),
            "maxItems": len(labels),
        }
        return {"type": "object", "properties": {"ranking": ranking}, "required": ["ranking"]}
    scores = {
        "type": "object",
        "properties": dict.fromkeys(labels, SCORE),
        "required": labels,
    }
    return {"type": "object", "properties": {"scores": scores}, "required": ["scores"]}


class JointOptions(BaseModel):
    """`prompt_options` of the joint variant."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    order: Order = "fixed"
    answer: Literal["scores", "ranking"] = "scores"
    # Accept a ranked prefix of any length (pools of many candidates): unlisted candidates
    # tie below, unknown and repeated labels are skipped and counted in the record.
    partial: bool = False
    # Repeats go round this many Latin squares (default: a fresh square every N repeats).
    squares: int | None = Field(default=None, ge=1)


def joint_options(options: Mapping[str, Any]) -> JointOptions:
    return read_options(JointOptions, options)
