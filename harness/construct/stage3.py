"""Stage 3: four candidate clips per dialogue, and the dataset folder (docs/formats.md)."""

from __future__ import annotations

import math
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from harness.construct.audio_tags import AUDIO_EXTENSIONS, captions_from_tags, find_audio
from harness.construct.embed import EmbedderConfig, embed_texts
from harness.construct.files import MARKER, prepare_out_dir, write_json
from harness.construct.stage2 import load_dialogues, require_captions
from harness.core.dataset import load_dataset
from harness.core.errors import DatasetError, HarnessError
from harness.core.files import read_jsonl, sha256_of, write_jsonl


class Stage3Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    n_candidates: int = Field(default=4, ge=2)
    top_fraction: float = Field(default=0.10, gt=0.0, le=1.0)
    seed: int = 0
    query: Literal["summary", "dialogue"] = Field(
        default="summary", description="embed the stage-2 caption, or the dialogue text"
    )
    audio_extensions: list[str] = Field(default_factory=lambda: list(AUDIO_EXTENSIONS))
    captions_from_tags: bool = Field(
        default=True, description="caption a clip that has none from its musicnn tags"
    )
    shuffle_candidates: bool = Field(
        default=True, description="present candidates in a seeded random order"
    )
    embedder: EmbedderConfig = Field(default_factory=EmbedderConfig)


def load_clips(path: Path) -> list[dict[str, Any]]:
    """Stage-1 clips; a clip may come without a caption (it is then captioned from its tags)."""
    clips = []
    for line_no, obj in read_jsonl(path):
        caption = obj.get("caption")
        if not isinstance(obj.get("id"), str) or not isinstance(caption, str | None):
            raise DatasetError(path, line_no, "expected a clip with an 'id' (and a 'caption')")
        clips.append(obj)
    if not clips:
        raise DatasetError(path, None, "no clips")
    return clips


def pool_size(n_eligible: int, config: Stage3Config) -> int:
    """How many of the best-ranked clips the candidates come from (top-1 included)."""
    top = math.ceil(round(config.top_fraction * n_eligible, 9))
    return min(n_eligible, max(top, config.n_candidates))


def pick_candidates(item_id: str, ranked: list[str], size: int, config: Stage3Config) -> list[str]:
    """The "1+3" rule: ranked[0] plus n-1 drawn from ranked[1:size], seeded per item."""
    rng = random.Random(f"stage3:{config.seed}:{item_id}")
    chosen = [ranked[0], *rng.sample(ranked[1:size], config.n_candidates - 1)]
    if config.shuffle_candidates:
        rng.shuffle(chosen)
    return chosen


def query_text(dialogue: dict[str, Any], config: Stage3Config) -> str:
    if config.query == "summary":
        return str(dialogue["summary"])
    return "\n".join(f"{t['speaker']}: {t['text']}" for t in dialogue["dialogue"])


@dataclass(frozen=True)
class Eligible:
    clips: list[dict[str, Any]]
    audio: dict[str, Path]
    excluded: dict[str, int]


def eligible_clips(clips: list[dict[str, Any]], audio_dir: Path, config: Stage3Config) -> Eligible:
    if not audio_dir.is_dir():
        raise HarnessError(f"{audio_dir}: audio folder not found")
    keep, audio = [], {}
    excluded = {"missing": 0, "unreadable": 0, "empty": 0}
    for clip in sorted(clips, key=lambda c: c["id"]):
        path, why = find_audio(audio_dir, clip["id"], config.audio_extensions)
        if path is None:
            excluded[why] += 1
            continue
        keep.append(clip)
        audio[clip["id"]] = path
    return Eligible(keep, audio, excluded)


def _caption_missing(pool: Eligible, config: Stage3Config) -> int:
    """Give the clips without a caption one made of their musicnn tags; how many."""
    missing = {c["id"]: pool.audio[c["id"]] for c in pool.clips if not c.get("caption")}
    if missing and not config.captions_from_tags:
        first = sorted(missing)[0]
        raise HarnessError(
            f"{len(missing)} clip(s) have no caption (first: {first}); set "
            "stage3.captions_from_tags: true to caption them from their audio tags"
        )
    captions = captions_from_tags(missing)
    for clip in pool.clips:
        if clip["id"] in captions:
            clip["caption"] = captions[clip["id"]]
            clip["caption_source"] = "musicnn tags"
    return len(captions)


def run_stage3(
    clips_path: Path,
    dialogues_path: Path,
    audio_dir: Path,
    out_dir: Path,
    config: Stage3Config | None = None,
    *,
    cache_dir: Path | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Write items.jsonl, clips.jsonl, audio/ and build.json to `out_dir`."""
    config = config or Stage3Config()
    dialogues = load_dialogues(dialogues_path)
    if config.query == "summary":
        require_captions(dialogues, dialogues_path)
    pool = eligible_clips(load_clips(clips_path), audio_dir, config)
    if len(pool.clips) < config.n_candidates:
        raise HarnessError(
            f"only {len(pool.clips)} clip(s) of {clips_path} have audio in {audio_dir}; "
            f"{config.n_candidates} candidates are needed per dialogue"
        )
    tagged = _caption_missing(pool, config)
    clip_ids = [c["id"] for c in pool.clips]
    clip_vectors = embed_texts(
        [c["caption"] for c in pool.clips], config.embedder, cache_dir=cache_dir
    )
    query_vectors = embed_texts(
        [query_text(d, config) for d in dialogues], config.embedder, cache_dir=cache_dir
    )
    # Rounded so that the last bits of a BLAS sum cannot reorder near-equal clips.
    similarity = np.round(query_vectors @ clip_vectors.T, 6)
    size = pool_size(len(clip_ids), config)

    items, used = [], set()
    top1_cosines = []
    for dialogue, row in zip(dialogues, similarity, strict=True):
        order = sorted(range(len(clip_ids)), key=lambda j: (-row[j], clip_ids[j]))
        ranked = [clip_ids[j] for j in order]
        candidates = pick_candidates(dialogue["id"], ranked, size, config)
        used.update(candidates)
        cosine = {clip_ids[j]: float(row[j]) for j in order[:size]}
        top1_cosines.append(cosine[ranked[0]])
        item = {"id": dialogue["id"], "dialogue": dialogue["dialogue"]}
        if dialogue.get("summary"):
            item["summary"] = dialogue["summary"]
        item["candidates"] = candidates
        item["retrieval"] = {"top1": ranked[0], "cosine": {c: cosine[c] for c in candidates}}
        sources = ("source_line", "topic", "emotions", "acts")
        item["source"] = {k: dialogue[k] for k in sources if k in dialogue}
        items.append(item)

    prepare_out_dir(out_dir, overwrite=overwrite)
    (out_dir / "audio").mkdir()
    clip_rows = []
    for clip in pool.clips:
        if clip["id"] not in used:
            continue
        source_path = pool.audio[clip["id"]]
        relative = f"audio/{clip['id']}{source_path.suffix.lower()}"
        shutil.copyfile(source_path, out_dir / relative)
        row = {"id": clip["id"], "audio": relative, "caption": clip["caption"]}
        row["aspects"] = clip.get("aspects", [])
        keys = ("start_s", "end_s", "caption_source")
        clip_rows.append(row | {k: clip[k] for k in keys if k in clip})
    write_jsonl(out_dir / "clips.jsonl", clip_rows)
    write_jsonl(out_dir / "items.jsonl", items)
    report = {
        "inputs": {
            "clips_sha256": sha256_of(clips_path),
            "dialogues_sha256": sha256_of(dialogues_path),
        },
        "n_items": len(items),
        "n_clips_in": len(pool.clips) + sum(pool.excluded.values()),
        "n_clips_eligible": len(pool.clips),
        "clips_excluded": pool.excluded,
        "n_captions_from_tags": tagged,
        "pool_size": size,
        "n_clips_used": len(clip_rows),
        "mean_top1_cosine": round(float(np.mean(top1_cosines)), 6),
        "embedder": config.embedder.model_dump(mode="json") | {"model": config.embedder.model_name},
        "config": config.model_dump(mode="json", exclude={"embedder"}),
    }
    load_dataset(out_dir)  # the folder must satisfy the dataset contract before it is marked
    write_json(out_dir / MARKER, report)
    return report
