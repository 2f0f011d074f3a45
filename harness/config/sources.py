"""A run's Hugging Face dataset (`hf://OWNER/NAME[@REVISION]`, a `save_to_disk` folder,
Parquet files), the `columns:` mapping it, and the folder it is written to (`folder_for`)."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from harness.core.errors import HarnessError

HF_PREFIX = "hf://"
ADDED_FIELDS = ("annotations", "annotators", "feedback")  # mappable since issue 47


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    config: str | None = None  # the dataset's configuration (subset), if it has several
    split: str | None = None  # default: the only split, else `train`


class ItemColumns(_Table):
    """Item field -> column name; a field not given is read from its own name's column."""

    id: str | None = None
    query: str | None = None
    dialogue: str | None = None  # a list of {speaker, text}, or a string (one turn)
    candidates: str | None = None
    human_ranking: str | None = None
    relevant: str | None = None
    relevance: str | None = None  # {candidate: gain}
    group: str | None = None
    summary: str | None = None
    annotations: str | None = None  # per-annotator rankings (the human-ceiling row)
    annotators: str | None = None
    feedback: str | None = None
    # An item's own `split` is read from a column named `split`: `split:` here names the table.


class ClipColumns(_Table):
    id: str | None = None
    audio: str | None = None  # an `Audio` column, or {bytes}/{array, sampling_rate}/a path
    caption: str | None = None
    title: str | None = None
    aspects: str | None = None


class Columns(BaseModel):
    """`columns:` of an experiment file: where item and clip fields come from."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    items: ItemColumns = ItemColumns()
    clips: ClipColumns | None = None  # None: candidates (and gold) are song titles


class HFSource(BaseModel):
    """What a run's dataset was made from (config.yaml's `hf_source`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    uri: str
    columns: Columns = Columns()


def is_hf_source(spec: str | Path) -> bool:
    """An `hf://` id, a Parquet file, or a folder that `datasets` wrote or of Parquet files
    (a dataset folder with items.jsonl is not)."""
    text = str(spec)
    if text.startswith(HF_PREFIX):
        return True
    path = Path(text)
    if path.is_file():
        return path.suffix == ".parquet"
    if not path.is_dir() or (path / "items.jsonl").exists():
        return False
    marks = ("dataset_dict.json", "state.json", "dataset_info.json")
    return any((path / m).exists() for m in marks) or any(path.rglob("*.parquet"))


def parse_hub_id(uri: str) -> tuple[str, str | None]:
    """`hf://OWNER/NAME@REV` -> (OWNER/NAME, REV or None)."""
    body = uri.removeprefix(HF_PREFIX)
    repo, _, revision = body.partition("@")
    # the Hub's rule: letters, digits, `-`, `_`, `.`; no `--` or `..`; not begun or ended by
    # `-` or `.` (so no part is a path such as `..`)
    part = r"\w(?:[\w.\-]*\w)?"
    named = re.fullmatch(f"{part}/{part}", repo) and "--" not in repo and ".." not in repo
    if not named or (revision == "" and "@" in body):
        raise HarnessError(f"{uri}: a Hub dataset is hf://OWNER/NAME or hf://OWNER/NAME@REVISION")
    return repo, revision or None


def data_root() -> Path:
    return Path(os.environ.get("BGM_JUDGE_DATA", "data"))


def folder_for(source: HFSource) -> Path:
    """Where `source` is written: data/hf/<name>-<12 hex of the source and mapping>."""
    uri = source.uri if source.uri.startswith(HF_PREFIX) else str(Path(source.uri).resolve())
    columns = source.columns.model_dump(mode="json")
    for table, added in (("items", ADDED_FIELDS), ("clips", ("aspects",))):
        for field in added if columns[table] else ():  # unmapped, the folder is as before
            if columns[table][field] is None:
                del columns[table][field]
    key = json.dumps([uri, columns], sort_keys=True)
    name = re.sub(r"[^A-Za-z0-9_.\-]+", "_", uri.removeprefix(HF_PREFIX).split("@")[0])
    name = name.strip("_")[-60:] or "dataset"
    return data_root() / "hf" / f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"
