"""The MusiCRS release (Surana et al. 2025, CC BY 4.0) as a dataset folder."""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.config.sources import HF_PREFIX, ItemColumns, is_hf_source
from harness.core.dataset import load_dataset, pydantic_reason
from harness.core.errors import DatasetError, HarnessError
from harness.core.files import MAX_POOL_VALUES, read_jsonl, write_jsonl
from harness.core.paths import UnsafePath, contained
from harness.interop.hf import load_table
from harness.interop.hf import title_id as clip_id

AUDIO_SUFFIXES = frozenset({".wav", ".flac", ".ogg", ".mp3", ".aiff", ".aif"})
CONTEXT_AUDIO = "context_audio"  # the folder of the dataset where the threads' audio is linked
SOURCE = "MusiCRS (Surana et al. 2025, https://github.com/rohan2810/MusiCRS), CC BY 4.0"


class Thread(BaseModel):
    """The fields of a MusiCRS line that the import reads (the others are ignored)."""

    model_config = ConfigDict(extra="ignore")
    name: str = Field(min_length=1)
    query: str = Field(min_length=1)
    combined_text: str = ""
    source_subreddit: str = Field(min_length=1)
    final_candidates: list[str] = Field(min_length=2)
    limited_gt: list[str]
    url: str | None = None


def normalise_title(title: str) -> str:
    """MusiCRS's matching key: lowercase, strip, curly quotes made straight, then
    surrounding double quotes, spaces and tabs removed."""
    text = title.lower().strip()
    text = text.replace("\u2018", "'").replace("\u2019", "'")
    text = text.replace("\u201c", '"').replace("\u201d", '"')
    return text.strip('" \t')


@dataclass
class ImportSummary:
    n_items: int = 0
    n_candidates: int = 0  # candidate slots over all items
    n_clips: int = 0  # distinct titles
    n_relevant: int = 0
    n_items_without_relevant: int = 0
    n_items_with_audio: int = 0
    n_duplicate_candidates: int = 0  # repeated titles within a thread, dropped
    groups: Counter[str] = field(default_factory=Counter)

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "groups": dict(self.groups.most_common())}


def _thread_audio(audio_root: Path, name: str, out: Path) -> list[str]:
    """The thread's audio files under `audio_root/<name>/`, linked into the dataset folder
    (`context_audio/<name>/`, so that every path of the dataset stays inside it); a thread
    name that is not a folder name inside `audio_root` is refused (UnsafePath)."""
    folder = contained(audio_root, name, "the thread name")
    if not folder.is_dir():
        return []
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in AUDIO_SUFFIXES)
    linked = []
    for file in files:
        relative = f"{CONTEXT_AUDIO}/{name}/{file.name}"
        target = contained(out, relative)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.unlink(missing_ok=True)
        try:
            target.symlink_to(file.resolve())
        except OSError:  # a file system without symbolic links
            shutil.copyfile(file, target)
        linked.append(relative)
    return linked


def _item(
    thread: Thread, line: int, source: Path | str, titles: dict[str, str], summary: ImportSummary
) -> dict[str, Any]:
    # Dicts as ordered sets: membership in a list made a thread of 100k candidates quadratic.
    candidates: dict[str, None] = {}
    by_key: dict[str, list[str]] = {}
    for title in thread.final_candidates:
        cid = clip_id(title)
        if titles.setdefault(cid, title) != title:
            raise DatasetError(source, line, f"two titles share the id {cid}: choose another hash")
        if cid in candidates:
            summary.n_duplicate_candidates += 1
            continue
        candidates[cid] = None
        by_key.setdefault(normalise_title(title), []).append(cid)
    relevant: dict[str, None] = {}
    for gold in thread.limited_gt:
        matches = by_key.get(normalise_title(gold))
        if not matches:
            raise DatasetError(
                source, line, f"limited_gt title {gold!r} is not among final_candidates"
            )
        relevant |= dict.fromkeys(matches)
    item: dict[str, Any] = {"id": thread.name, "query": thread.query}
    if thread.combined_text.strip():
        item["dialogue"] = [{"speaker": "thread", "text": thread.combined_text.strip()}]
    item |= {
        "group": thread.source_subreddit,
        "candidates": list(candidates),
        "relevant": list(relevant),
    }
    if thread.url:
        item["url"] = thread.url
    return item


def _rows(source: Path | str, split: str | None) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line or row number, thread) from the release JSONL or a Hugging Face dataset
    (`hf://rohan2810/MusiCRS[@REVISION]`, a save_to_disk folder, Parquet files)."""
    if not is_hf_source(source):
        yield from read_jsonl(Path(source), max_values=MAX_POOL_VALUES)
        return
    table, _ = load_table(str(source), ItemColumns(split=split))
    for index, row in enumerate(table, start=1):
        yield index, dict(row)


def _check_out(out: Path, *, overwrite: bool) -> None:
    """`out` is a new folder, an empty one, or (with `overwrite`) a dataset this importer
    wrote: an existing dataset is never silently replaced."""
    if not out.exists():
        return
    if not out.is_dir():
        raise HarnessError(f"--out {out}: a file, not a folder")
    written = {"items.jsonl", "clips.jsonl", "README.md", CONTEXT_AUDIO}
    present = {p.name for p in out.iterdir()}
    if not present:
        return
    if not overwrite:
        raise HarnessError(
            f"--out {out}: the folder is not empty; give a new folder, or pass --overwrite to "
            "replace a dataset imported there"
        )
    if present - written:
        raise HarnessError(
            f"--out {out}: --overwrite replaces only a folder this importer wrote; it also "
            f"holds {', '.join(sorted(present - written)[:3])}"
        )
    shutil.rmtree(out / CONTEXT_AUDIO, ignore_errors=True)


def import_musicrs(
    source: Path | str,
    out: Path,
    *,
    audio: Path | None = None,
    only_with_audio: bool = False,
    split: str | None = None,
    overwrite: bool = False,
) -> ImportSummary:
    """Write `out/items.jsonl`, `out/clips.jsonl` and `out/README.md` from the MusiCRS
    JSONL at `source` (or the release as a Hugging Face dataset, its `split`; with `audio`,
    the threads' audio linked under `out/context_audio/`), then load the folder back to
    validate it. `out` must be new or empty; `overwrite` replaces a dataset imported there
    before."""
    if audio is not None and not audio.is_dir():
        raise HarnessError(f"--audio {audio}: folder not found")
    if only_with_audio and audio is None:
        raise HarnessError("--only-with-audio needs --audio DIR")
    _check_out(out, overwrite=overwrite)
    summary = ImportSummary()
    titles: dict[str, str] = {}
    items: list[dict[str, Any]] = []
    seen: set[str] = set()
    out.mkdir(parents=True, exist_ok=True)
    for line, row in _rows(source, split):
        try:
            thread = Thread.model_validate(row)
        except ValidationError as exc:
            raise DatasetError(source, line, pydantic_reason(exc)) from None
        if thread.name in seen:
            raise DatasetError(source, line, f"second thread named {thread.name!r}")
        seen.add(thread.name)
        item = _item(thread, line, source, titles, summary)
        try:
            context = _thread_audio(audio, thread.name, out) if audio is not None else []
        except UnsafePath as exc:
            raise DatasetError(source, line, f"{exc}: not a folder name under --audio") from None
        if context:
            item["context_audio"] = context
            summary.n_items_with_audio += 1
        elif only_with_audio:
            continue
        items.append(item)
    if not items:
        raise DatasetError(source, None, "no threads to import")
    used = {cid for item in items for cid in item["candidates"]}
    clips = [{"id": cid, "title": title} for cid, title in titles.items() if cid in used]
    for item in items:
        summary.n_items += 1
        summary.n_candidates += len(item["candidates"])
        summary.n_relevant += len(item["relevant"])
        summary.n_items_without_relevant += not item["relevant"]
        summary.groups[item["group"]] += 1
    summary.n_clips = len(clips)
    write_jsonl(out / "items.jsonl", items)
    write_jsonl(out / "clips.jsonl", clips)
    (out / "README.md").write_text(_readme(source, summary), encoding="utf-8")
    load_dataset(out, check_audio=audio is not None)
    return summary


def _readme(source: Path | str, summary: ImportSummary) -> str:
    name = source if str(source).startswith(HF_PREFIX) else Path(source).name
    return (
        "# MusiCRS, imported\n\n"
        f"Imported by `harness import musicrs` from `{name}`.\n"
        f"Source: {SOURCE}. Redistribution must keep this attribution.\n\n"
        f"{summary.n_items} threads, {summary.n_clips} distinct song titles, "
        f"{summary.n_candidates} candidates and {summary.n_relevant} gold titles in all; "
        f"{summary.n_items_without_relevant} threads without gold; "
        f"{summary.n_items_with_audio} with context audio.\n"
    )
