"""A refinement set for `protocol: refine` (MuseChat's shape) from MusicCaps captions."""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from harness.construct.files import MARKER, prepare_out_dir, write_json
from harness.construct.stage1 import read_musiccaps
from harness.core.errors import HarnessError
from harness.core.files import sha256_of, write_jsonl

# Aspects about the recording, not the music: a listener does not ask for them.
RECORDING = re.compile(r"\b(quality|recording|recorded|mono|audio|noise|noisy)\b", re.I)


class RefineSetConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    pool: int = Field(default=500, ge=2, description="candidates per item, the gold included")
    items: int = Field(default=200, ge=1)
    seed: int = Field(default=0, ge=0)
    query_aspects: int = Field(default=2, ge=1, description="gold aspects in the request")
    min_aspects: int = Field(default=4, ge=2, description="aspects a clip needs to be used")

    @model_validator(mode="after")
    def _room_for_the_rest(self) -> RefineSetConfig:
        if self.query_aspects >= self.min_aspects:
            raise ValueError("query_aspects must be below min_aspects (the user says the rest)")
        return self


def refine_set_config(**options: Any) -> RefineSetConfig:
    """The options, validated; HarnessError names the first bad one."""
    try:
        return RefineSetConfig(**options)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = "--" + "-".join(str(p) for p in first["loc"]).replace("_", "-")
        message = first["msg"].removeprefix("Value error, ")
        raise HarnessError(f"{where}: {message}" if first["loc"] else message) from None


def build_items(
    rows: list[dict[str, Any]], config: RefineSetConfig
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(items, clips): `items` draws of a gold and its pool, seeded."""
    eligible = [
        row
        for row in rows
        if row["caption"]
        and len(row["aspects"]) >= config.min_aspects
        and sum(not RECORDING.search(a) for a in row["aspects"]) > config.query_aspects
    ]
    if len(eligible) < max(config.pool, config.items):
        raise HarnessError(
            f"{len(eligible)} MusicCaps clips have a caption and at least {config.min_aspects} "
            f"aspects: too few for pools of {config.pool} and {config.items} items"
        )
    rng = random.Random(config.seed)
    golds = rng.sample(range(len(eligible)), config.items)
    items, used = [], set()
    width = len(str(config.items))
    for number, gold_index in enumerate(golds, start=1):
        others = [i for i in rng.sample(range(len(eligible)), config.pool) if i != gold_index]
        pool = [gold_index, *others[: config.pool - 1]]
        rng.shuffle(pool)
        gold = eligible[gold_index]
        musical = [a for a in gold["aspects"] if not RECORDING.search(a)]
        chosen = sorted(rng.sample(range(len(musical)), config.query_aspects))
        asked = [musical[i] for i in chosen]
        items.append(
            {
                "id": f"r{number:0{width}d}",
                "query": f"Recommend me some music: {', '.join(asked)}.",
                "query_aspects": asked,
                "candidates": [eligible[i]["id"] for i in pool],
                "relevant": [gold["id"]],
            }
        )
        used.update(pool)
    clips = [
        {"id": row["id"], "caption": row["caption"], "aspects": row["aspects"]}
        for row in (eligible[i] for i in sorted(used))
    ]
    return items, clips


def run_refine_set(
    csv_path: Path, out: Path, config: RefineSetConfig, *, overwrite: bool = False
) -> dict[str, Any]:
    """Write the dataset folder (items.jsonl, clips.jsonl, build.json); the build report."""
    rows = read_musiccaps(csv_path)
    items, clips = build_items(rows, config)
    prepare_out_dir(out, overwrite=overwrite)
    write_jsonl(out / "clips.jsonl", clips)
    write_jsonl(out / "items.jsonl", items)
    report = {
        "source": csv_path.name,
        "source_sha256": sha256_of(csv_path),
        "config": config.model_dump(),
        "n_rows": len(rows),
        "n_items": len(items),
        "n_clips": len(clips),
        "pool": config.pool,
    }
    write_json(out / MARKER, report)
    return report
