"""Hugging Face datasets as dataset folders: `hf://OWNER/NAME[@REVISION]` (fetched through the
`datasets` library and its cache), a folder written by `save_to_disk`, a folder of Parquet
files or one Parquet file, with a column mapping (`columns:`) from its rows to items and clips.

The dataset is written once as an ordinary dataset folder (`items.jsonl`, `clips.jsonl`,
`source.json`) under the harness's data folder (`$BGM_JUDGE_DATA`, default `data/`), at
`hf/<name>-<hash of the source and the mapping>`; everything downstream (runs, reports, the
response cache) reads that folder. An `Audio` column's bytes are written as files named by
their SHA-256 (`<the folder>/audio/<hash>.<format>`), so a recording is one file however many
rows carry it, and cached answers (keyed by the audio's bytes) stay valid; the files stay inside
the dataset folder, where a dataset's clip paths must lead. The audio is read from the column's raw
bytes (`Audio(decode=False)`) with soundfile: `datasets`' own decoding needs torchcodec.

Rows are read with `columns.items` (and `columns.clips`): each maps an item (clip) field to a
column name; a field not mapped is read from the column of the same name if there is one.
Without `columns.clips`, candidates are song titles: each distinct title becomes a text-only
clip whose id is a hash of the title.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import soundfile

from harness.config.sources import (
    HF_PREFIX,
    ClipColumns,
    HFSource,
    ItemColumns,
    _Table,
    folder_for,
    parse_hub_id,
)
from harness.core.errors import DatasetError, HarnessError

if TYPE_CHECKING:
    import datasets

SOURCE_FILE = "source.json"
ITEM_FIELDS = (
    "id",
    "query",
    "dialogue",
    "candidates",
    "human_ranking",
    "relevant",
    "relevance",
    "group",
    "summary",
)
CLIP_FIELDS = ("id", "audio", "caption", "title")
_FORMATS = {"WAV": "wav", "FLAC": "flac", "OGG": "ogg", "MP3": "mp3", "AIFF": "aiff"}


def load_table(uri: str, table: _Table) -> tuple[datasets.Dataset, dict[str, Any]]:
    """One split of the source as a `datasets.Dataset`, and where it came from (the Hub
    repository, the revision asked for and the commit it resolved to)."""
    try:
        import datasets
    except ImportError:
        raise HarnessError(
            "Hugging Face datasets need the hf extra: pip install 'bgm-judge[hf]'"
        ) from None
    origin: dict[str, Any] = {"uri": uri}
    try:
        if uri.startswith(HF_PREFIX):
            repo, revision = parse_hub_id(uri)
            builder = datasets.load_dataset_builder(repo, name=table.config, revision=revision)
            origin |= {"repo": repo, "revision": revision, "commit": builder.hash}
            builder.download_and_prepare()
            loaded: Any = builder.as_dataset()
        elif Path(uri).is_file():
            loaded = datasets.Dataset.from_parquet(uri)
        elif any((Path(uri) / m).exists() for m in ("dataset_dict.json", "state.json")):
            loaded = datasets.load_from_disk(uri)
        else:
            loaded = datasets.load_dataset(uri, name=table.config)
        if not uri.startswith(HF_PREFIX):
            origin["path"] = str(Path(uri).resolve())
    except HarnessError:
        raise
    except (FileNotFoundError, ValueError, ConnectionError, OSError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise HarnessError(f"{uri}: cannot load the dataset ({reason})") from None
    if isinstance(loaded, datasets.Dataset):
        return loaded, origin
    splits = list(loaded)
    split = table.split or (splits[0] if len(splits) == 1 else "train")
    if split not in loaded:
        raise HarnessError(f"{uri}: no split {split!r} (splits: {', '.join(splits)})")
    return loaded[split], origin | {"split": split}


def _column(data: datasets.Dataset, mapping: _Table, field: str, *, required: bool) -> str | None:
    given = getattr(mapping, field)
    name = given or field
    if name in data.column_names:
        return str(name)
    if given is not None or required:
        known = ", ".join(data.column_names)
        what = f"columns.{type(mapping).__name__.removesuffix('Columns').lower()}s.{field}"
        raise HarnessError(f"{what}: no column {name!r} (columns: {known})")
    return None


def title_id(title: str) -> str:
    return "song-" + hashlib.sha256(title.encode("utf-8")).hexdigest()[:12]


def _dialogue(value: Any) -> list[dict[str, str]]:
    if isinstance(value, str):
        return [{"speaker": "user", "text": value}] if value.strip() else []
    if isinstance(value, Mapping):  # a struct of lists, as `datasets` stores a list of structs
        return [
            {"speaker": s, "text": t}
            for s, t in zip(value.get("speaker", []), value.get("text", []), strict=True)
        ]
    return [dict(turn) for turn in value or []]


def _items(
    data: datasets.Dataset, mapping: ItemColumns, titles: dict[str, str] | None
) -> Iterator[dict[str, Any]]:
    cols = {f: _column(data, mapping, f, required=f in ("id", "candidates")) for f in ITEM_FIELDS}
    wanted = [c for c in cols.values() if c is not None]
    for row in data.select_columns(wanted):
        item: dict[str, Any] = {}
        for field, col in cols.items():
            value = row[col] if col is not None else None
            if value is None:
                continue
            if field == "dialogue":
                value = _dialogue(value)
            elif field == "id":
                value = str(value)
            elif titles is not None and field in ("candidates", "human_ranking", "relevant"):
                value = [_title(titles, str(t)) for t in value]
            elif titles is not None and field == "relevance":
                value = {_title(titles, str(t)): g for t, g in value.items()}
            elif field in ("candidates", "human_ranking", "relevant"):
                value = [str(v) for v in value]
            item[field] = value
        yield item


def _title(titles: dict[str, str], title: str) -> str:
    cid = title_id(title)
    titles.setdefault(cid, title)
    return cid


def _audio_file(value: Any, audio_dir: Path, where: str) -> str:
    """Write the audio of one cell under `audio_dir` as <sha256>.<format>; its file name."""
    data: bytes | None = None
    if isinstance(value, Mapping) and value.get("bytes"):
        data = bytes(value["bytes"])
    elif isinstance(value, Mapping) and value.get("array") is not None:
        buffer = io.BytesIO()
        array = np.asarray(value["array"], dtype=np.float32)
        soundfile.write(buffer, array, int(value["sampling_rate"]), format="WAV")
        data = buffer.getvalue()
    else:
        path = value.get("path") if isinstance(value, Mapping) else value
        if isinstance(path, str) and Path(path).is_file():
            data = Path(path).read_bytes()
    if not data:
        raise HarnessError(f"{where}: no audio bytes, array or readable file in the cell")
    try:
        info = soundfile.info(io.BytesIO(data))
    except (RuntimeError, soundfile.LibsndfileError) as exc:
        raise HarnessError(f"{where}: audio soundfile cannot read ({exc})") from None
    if info.frames == 0:
        raise HarnessError(f"{where}: the audio has no samples")
    name = f"{hashlib.sha256(data).hexdigest()}.{_FORMATS.get(info.format, 'wav')}"
    target = audio_dir / name
    if not target.is_file():
        audio_dir.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, target)
    return name


def _clips(
    data: datasets.Dataset, mapping: ClipColumns, audio_dir: Path, out: Path, uri: str
) -> Iterator[dict[str, Any]]:
    import datasets

    cols = {f: _column(data, mapping, f, required=f == "id") for f in CLIP_FIELDS}
    audio = cols["audio"]
    if audio is not None and isinstance(data.features[audio], datasets.Audio):
        data = data.cast_column(audio, datasets.Audio(decode=False))
    relative = os.path.relpath(audio_dir.resolve(), out.resolve())
    wanted = [c for c in cols.values() if c is not None]
    for index, row in enumerate(data.select_columns(wanted)):
        clip: dict[str, Any] = {"id": str(row[cols["id"]])}
        for field in ("caption", "title"):
            col = cols[field]
            if col is not None and row[col] is not None:
                clip[field] = str(row[col])
        if audio is not None and row[audio] is not None:
            name = _audio_file(row[audio], audio_dir, f"{uri}: clips row {index} ({audio})")
            clip["audio"] = f"{relative}/{name}"
        yield clip


def materialize(source: HFSource, out: Path | None = None) -> Path:
    """Write `source` as a dataset folder (by default `folder_for(source)`), unless the
    folder already holds the same data (the fingerprints in its source.json); the folder."""
    from harness.core.dataset import load_dataset

    out = out or folder_for(source)
    columns = source.columns
    items_data, origin = load_table(source.uri, columns.items)
    clips_data, clips_origin = (
        load_table(source.uri, columns.clips) if columns.clips is not None else (None, None)
    )
    record = {
        **origin,
        "columns": columns.model_dump(mode="json", exclude_none=True),
        "fingerprint": items_data._fingerprint,
        "clips_fingerprint": None if clips_data is None else clips_data._fingerprint,
    }
    if clips_origin and clips_origin.get("split"):
        record["clips_split"] = clips_origin["split"]
    marker = out / SOURCE_FILE
    if marker.is_file() and json.loads(marker.read_text(encoding="utf-8")) == record:
        return out
    out.mkdir(parents=True, exist_ok=True)
    titles: dict[str, str] | None = {} if clips_data is None else None
    items = list(_items(items_data, columns.items, titles))
    if clips_data is not None and columns.clips is not None:
        clips = list(_clips(clips_data, columns.clips, out / "audio", out, source.uri))
    else:
        clips = [{"id": cid, "title": title} for cid, title in (titles or {}).items()]
    _write_jsonl(out / "items.jsonl", items)
    _write_jsonl(out / "clips.jsonl", clips)
    try:
        load_dataset(out)
    except DatasetError as exc:  # line N of items.jsonl is row N - 1 of its table (from 0)
        where = f"{Path(exc.path).stem} row {exc.line - 1}" if exc.line else Path(exc.path).name
        raise HarnessError(f"{source.uri}: {where}: {exc.reason} (written to {out})") from None
    marker.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return out


def read_source(folder: Path) -> dict[str, Any] | None:
    """The source.json of a dataset folder written from a Hugging Face dataset, else None."""
    path = Path(folder) / SOURCE_FILE
    if not path.is_file():
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    tmp = path.with_suffix(".jsonl.tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False, default=_plain) + "\n")
    os.replace(tmp, path)


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
