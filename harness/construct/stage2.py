"""Stage 2: DailyDialog dialogues, filtered by length, each with a music-oriented caption."""

from __future__ import annotations

import random
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness.construct.files import dumps, write_json
from harness.core.errors import DatasetError, HarnessError
from harness.core.files import read_jsonl, read_text, sha256_of, write_jsonl
from providers import ProviderBlock

TURN_SEPARATOR = "__eou__"
SPEAKERS = ("A", "B")
PER_TURN_LABELS = ("emotion", "act")
LABELS = (*PER_TURN_LABELS, "topic")
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")


class Stage2Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    min_turns: int = Field(default=4, ge=1)
    max_turns: int | None = Field(default=12, ge=1)
    min_words: int = Field(default=30, ge=0)
    max_words: int | None = Field(default=250, ge=1)
    dedupe: bool = Field(default=True, description="drop repeated dialogue texts (first kept)")
    detokenize: bool = Field(default=True, description="undo DailyDialog's spaced punctuation")
    sample: int | None = Field(default=None, gt=0, description="seeded sample of N dialogues")
    seed: int = 0
    id_prefix: str = Field(default="dd", pattern=r"^[A-Za-z0-9_\-]*$")
    provider: ProviderBlock | None = Field(
        default=None, description="captioning model; none: dialogues are written uncaptioned"
    )

    @model_validator(mode="after")
    def _bounds(self) -> Stage2Config:
        if self.max_turns is not None and self.max_turns < self.min_turns:
            raise ValueError("max_turns is below min_turns")
        if self.max_words is not None and self.max_words < self.min_words:
            raise ValueError("max_words is below min_words")
        return self


def detokenize(text: str) -> str:
    """'I don ’ t know , Sam .' -> 'I don’t know, Sam.' (DailyDialog spaces punctuation)."""
    text = re.sub(r"(\w) ([’']) ?(\w)", r"\1\2\3", text)
    text = re.sub(r" ([.,!?;:%)\]])", r"\1", text)
    text = re.sub(r"([(\[$£€]) ", r"\1", text)
    return " ".join(text.split())


def count_words(text: str) -> int:
    return len(_WORD.findall(text))


def label_paths(text_path: Path) -> dict[str, Path]:
    """The label files that sit beside a DailyDialog text file, by naming convention."""
    stem = text_path.stem
    split = "" if stem == "dialogues_text" else "_" + stem.removeprefix("dialogues_")
    return {label: text_path.with_name(f"dialogues_{label}{split}.txt") for label in LABELS}


def find_text_file(source: Path) -> Path:
    """The dialogue file itself, or the one in a folder: dialogues_text.txt (the full
    release) or the single dialogues_<split>.txt of a split folder."""
    if source.is_file():
        return source
    if not source.is_dir():
        raise DatasetError(source, None, "DailyDialog file or folder not found")
    if (source / "dialogues_text.txt").is_file():
        return source / "dialogues_text.txt"
    labels = tuple(f"dialogues_{label}" for label in LABELS)
    found = sorted(p for p in source.glob("dialogues_*.txt") if not p.name.startswith(labels))
    if len(found) != 1:
        names = ", ".join(p.name for p in found) or "none"
        raise DatasetError(
            source, None, f"expected dialogues_text.txt or one dialogues_<split>.txt ({names})"
        )
    return found[0]


def _read_lines(path: Path) -> list[str]:
    lines = read_text(path).split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _int_labels(path: Path, line_no: int, raw: str) -> list[int]:
    try:
        return [int(token) for token in raw.split()]
    except ValueError:
        raise DatasetError(path, line_no, f"labels are not integers: {raw[:40]!r}") from None


@dataclass
class ReadResult:
    dialogues: list[dict[str, Any]]
    text_path: Path
    label_files: list[str]
    mismatches: list[dict[str, Any]] = field(default_factory=list)
    duplicates: int = 0
    empty_lines: int = 0


def read_dailydialog(source: Path, config: Stage2Config) -> ReadResult:
    text_path = find_text_file(source)
    lines = _read_lines(text_path)
    labels = {
        label: (path, _read_lines(path))
        for label, path in label_paths(text_path).items()
        if path.is_file()
    }
    for path, label_lines in labels.values():
        if len(label_lines) != len(lines):
            raise DatasetError(
                path, None, f"{len(label_lines)} lines but {text_path.name} has {len(lines)}"
            )
    result = ReadResult([], text_path, sorted(p.name for p, _ in labels.values()))
    seen: set[str] = set()
    for index, line in enumerate(lines):
        line_no = index + 1
        raw_turns = [t.strip() for t in line.split(TURN_SEPARATOR) if t.strip()]
        if not raw_turns:
            result.empty_lines += 1
            continue
        texts = [detokenize(t) if config.detokenize else t for t in raw_turns]
        if config.dedupe:
            fingerprint = " ".join(" ".join(texts).lower().split())
            if fingerprint in seen:
                result.duplicates += 1
                continue
            seen.add(fingerprint)
        record: dict[str, Any] = {
            "id": f"{config.id_prefix}{line_no:05d}",
            "source_line": line_no,
            "dialogue": [
                {"speaker": SPEAKERS[i % 2], "text": text} for i, text in enumerate(texts)
            ],
        }
        mismatch: dict[str, Any] = {}
        for label in PER_TURN_LABELS:
            if label not in labels:
                continue
            path, label_lines = labels[label]
            values = _int_labels(path, line_no, label_lines[index])
            if len(values) == len(texts):
                record[f"{label}s"] = values
            else:
                record[f"{label}s"] = None
                mismatch[label] = len(values)
        if "topic" in labels:
            path, label_lines = labels["topic"]
            topic = _int_labels(path, line_no, label_lines[index])
            record["topic"] = topic[0] if len(topic) == 1 else None
        if mismatch:
            result.mismatches.append({"line": line_no, "turns": len(texts), **mismatch})
        record["n_words"] = sum(count_words(t) for t in texts)
        result.dialogues.append(record)
    return result


def dialogue_stats(dialogues: list[dict[str, Any]]) -> dict[str, Any]:
    if not dialogues:
        return {"count": 0}
    turns = [len(d["dialogue"]) for d in dialogues]
    words = [d["n_words"] for d in dialogues]
    return {
        "count": len(dialogues),
        "mean_turns": round(statistics.fmean(turns), 3),
        "median_turns": statistics.median(turns),
        "mean_words": round(statistics.fmean(words), 3),
        "median_words": statistics.median(words),
        "mean_words_per_turn": round(sum(words) / sum(turns), 3),
    }


def length_filter(
    dialogues: list[dict[str, Any]], config: Stage2Config
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    removed = {"too_few_turns": 0, "too_many_turns": 0, "too_few_words": 0, "too_many_words": 0}
    kept = []
    for dialogue in dialogues:
        turns, words = len(dialogue["dialogue"]), dialogue["n_words"]
        if turns < config.min_turns:
            removed["too_few_turns"] += 1
        elif config.max_turns is not None and turns > config.max_turns:
            removed["too_many_turns"] += 1
        elif words < config.min_words:
            removed["too_few_words"] += 1
        elif config.max_words is not None and words > config.max_words:
            removed["too_many_words"] += 1
        else:
            kept.append(dialogue)
    return kept, removed


def seeded_sample(
    dialogues: list[dict[str, Any]], n: int | None, seed: int
) -> list[dict[str, Any]]:
    """n dialogues drawn without replacement, returned in source order."""
    if n is None or n >= len(dialogues):
        return list(dialogues)
    chosen = set(random.Random(f"stage2:{seed}").sample(range(len(dialogues)), n))
    return [d for i, d in enumerate(dialogues) if i in chosen]


def run_stage2(
    source: Path,
    out_dir: Path,
    config: Stage2Config | None = None,
    *,
    cache_dir: Path | None = None,
) -> dict[str, Any]:
    """Read, filter, sample and caption; writes dialogues.jsonl and report.json to `out_dir`."""
    from harness.construct.captions import caption_dialogues

    config = config or Stage2Config()
    read = read_dailydialog(source, config)
    kept, removed = length_filter(read.dialogues, config)
    if not kept:
        raise HarnessError(
            f"{read.text_path}: no dialogue passes the filters (removed: {dumps(removed)})"
        )
    chosen = seeded_sample(kept, config.sample, config.seed)
    report: dict[str, Any] = {
        "input": {
            "text_file": read.text_path.name,
            "text_sha256": sha256_of(read.text_path),
            "label_files": read.label_files,
        },
        "empty_lines": read.empty_lines,
        "duplicates_removed": read.duplicates,
        "label_mismatches": read.mismatches,
        "stats_read": dialogue_stats(read.dialogues),
        "removed_by_filter": removed,
        "stats_kept": dialogue_stats(kept),
        "stats_selected": dialogue_stats(chosen),
        "config": config.model_dump(mode="json", exclude={"provider"}),
    }
    outcome = None
    if config.provider is not None:
        outcome = caption_dialogues(chosen, config.provider, cache_dir=cache_dir)
        report["config"]["provider"] = config.provider.model_dump(mode="json", exclude_none=True)
    report["captions"] = outcome.summary() if outcome else None
    for dialogue in chosen:
        dialogue["summary"] = outcome.captions.get(dialogue["id"]) if outcome else None
    write_jsonl(out_dir / "dialogues.jsonl", chosen)
    write_json(out_dir / "report.json", report)
    return report


def load_dialogues(path: Path) -> list[dict[str, Any]]:
    """stage2/dialogues.jsonl as written by `run_stage2`."""
    dialogues = []
    for line_no, obj in read_jsonl(path):
        if not isinstance(obj.get("id"), str) or not isinstance(obj.get("dialogue"), list):
            raise DatasetError(path, line_no, "expected a dialogue with 'id' and 'dialogue'")
        dialogues.append(obj)
    if not dialogues:
        raise DatasetError(path, None, "no dialogues")
    return dialogues


def require_captions(dialogues: list[dict[str, Any]], path: Path) -> None:
    missing = [d["id"] for d in dialogues if not d.get("summary")]
    if missing:
        raise HarnessError(
            f"{path}: {len(missing)} dialogue(s) have no caption (first: {dumps(missing[:3])}); "
            "re-run stage 2 with a provider, or use stage 3's query: dialogue"
        )
