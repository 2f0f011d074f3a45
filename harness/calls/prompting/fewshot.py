"""Worked examples for few-shot prompts (`FewShotOptions`, docs/prompts.md): scores following the
human ranking; a run is refused when an example is an evaluated item (same id, or the same
dialogue) or shows a candidate clip of one (by SHA-256) unless `allow_clip_overlap`."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.core.audio import file_sha256
from harness.core.dataset import Clip, Dataset, Item, load_dataset
from harness.core.errors import HarnessError

DEFAULT_K = 2
M = TypeVar("M", bound=BaseModel)
TOP_SCORE, BOTTOM_SCORE = 8.5, 1.5


class FewShotOptions(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    k: int | None = Field(default=None, ge=1, le=16)
    examples: Path | None = None
    example_ids: tuple[str, ...] | None = Field(default=None, min_length=1)
    example_split: str | None = None
    example_audio: bool = False
    example_scores: tuple[float, ...] | None = None
    allow_clip_overlap: bool = False


@dataclass(frozen=True)
class Example:
    """One worked example: an item, its clips in candidate order, and the score of each."""

    item: Item
    clips: tuple[Clip, ...]
    scores: tuple[float, ...]
    source: Path
    summary: str | None = None


def dialogue_key(item: Item) -> str:
    """Identity of a dialogue's content (speakers and text, whitespace and case folded)."""
    text = "\n".join(f"{t.speaker}: {' '.join(t.text.split())}" for t in item.dialogue)
    return hashlib.sha256(text.casefold().encode("utf-8")).hexdigest()


def read_options(model: type[M], options: Mapping[str, Any]) -> M:
    """`prompt_options` read as `model`; HarnessError names the first bad field."""
    try:
        return model.model_validate(dict(options))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise HarnessError(f"prompt_options.{where}: {first['msg']}") from None


def few_shot_options(options: Mapping[str, Any]) -> FewShotOptions:
    return read_options(FewShotOptions, options)


def score_ladder(n: int) -> tuple[float, ...]:
    """Scores for human ranks 1..n, evenly spaced from TOP_SCORE down to BOTTOM_SCORE."""
    if n == 1:
        return (TOP_SCORE,)
    step = (TOP_SCORE - BOTTOM_SCORE) / (n - 1)
    return tuple(round(TOP_SCORE - i * step, 1) for i in range(n))


def load_examples(options: Mapping[str, Any], run_dataset: Path) -> tuple[Example, ...]:
    """The worked examples `options` ask for; raises HarnessError naming what is wrong."""
    opts = few_shot_options(options)
    source = Path(opts.examples or run_dataset)
    dataset = load_dataset(source)
    if opts.example_ids:
        unknown = [i for i in opts.example_ids if i not in {it.id for it in dataset.items}]
        if unknown:
            raise HarnessError(f"prompt_options.example_ids: {unknown} not in {source}")
        pool = [dataset.item(i) for i in opts.example_ids]
    elif opts.example_split:
        pool = [
            i for i in dataset.items if (i.model_extra or {}).get("split") == opts.example_split
        ]
    else:
        pool = list(dataset.items)
    k = opts.k or (len(opts.example_ids) if opts.example_ids else DEFAULT_K)
    if len(pool) < k:
        where = f"split {opts.example_split!r} of " if opts.example_split else ""
        raise HarnessError(
            f"prompt_options.k is {k} but {where}{source} offers {len(pool)} example item(s)"
        )
    return tuple(_example(item, dataset, opts, source) for item in pool[:k])


def _example(item: Item, dataset: Dataset, opts: FewShotOptions, source: Path) -> Example:
    if item.human_ranking is None:
        raise HarnessError(f"few-shot example {item.id} in {source} has no human_ranking")
    n = len(item.candidates)
    ladder = opts.example_scores or score_ladder(n)
    if len(ladder) != n:
        raise HarnessError(
            f"prompt_options.example_scores has {len(ladder)} scores; "
            f"example {item.id} has {n} candidates"
        )
    by_rank = dict(zip(item.human_ranking, ladder, strict=True))
    return Example(
        item=item,
        clips=tuple(dataset.clips[cid] for cid in item.candidates),
        scores=tuple(float(by_rank[cid]) for cid in item.candidates),
        source=source,
    )


def check_no_leak(
    examples: Iterable[Example],
    evaluated: Iterable[Item],
    run_dataset: Path,
    clips: Mapping[str, Clip] | None = None,
    *,
    allow_clip_overlap: bool = False,
) -> None:
    """Refuse a run whose examples would tell the model an answer (module docstring); the
    clips are checked when the run's `clips` are given."""
    examples, evaluated = list(examples), list(evaluated)
    _check_items(examples, evaluated, run_dataset)
    if clips is not None and not allow_clip_overlap:
        _check_clips(examples, evaluated, clips)


def _check_items(examples: list[Example], evaluated: list[Item], run_dataset: Path) -> None:
    ids = {item.id for item in evaluated}
    dialogues = {dialogue_key(item): item.id for item in evaluated}
    same_root = Path(run_dataset).resolve()
    for example in examples:
        item = example.item
        if example.source.resolve() == same_root and item.id in ids:
            clash = item.id
        elif dialogue_key(item) in dialogues:
            clash = dialogues[dialogue_key(item)]
        else:
            continue
        raise HarnessError(
            f"few-shot example {item.id} ({example.source}) is also evaluated in this run "
            f"(as {clash}): take the examples from items outside the evaluated set "
            "(prompt_options.examples, example_ids or example_split)"
        )


def _check_clips(examples: list[Example], evaluated: list[Item], clips: Mapping[str, Clip]) -> None:
    candidates: dict[str, tuple[str, str]] = {}  # audio hash -> (item id, clip id)
    for item in evaluated:
        for cid in item.candidates:
            clip = clips.get(cid)
            if clip is not None and clip.path.is_file():
                candidates.setdefault(file_sha256(clip.path), (item.id, cid))
    for example in examples:
        for clip in example.clips:
            if not clip.path.is_file():
                continue
            clash = candidates.get(file_sha256(clip.path))
            if clash is not None:
                raise HarnessError(
                    f"few-shot example {example.item.id} ({example.source}) shows clip "
                    f"{clip.id}, whose audio is candidate {clash[1]} of evaluated item "
                    f"{clash[0]}: take examples with other clips, or set "
                    "prompt_options.allow_clip_overlap: true"
                )
