"""Hugging Face datasets as dataset folders: `hf://OWNER/NAME[@REVISION]` (fetched through the
`datasets` library and its cache), a folder written by `save_to_disk`, a folder of Parquet
files or one Parquet file, with a column mapping (`columns:`) from its rows to items and clips."""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Iterator, Mapping, Sequence
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
from harness.core.audio import MAX_CLIP_BYTES
from harness.core.errors import DatasetError, HarnessError, first_line
from harness.core.files import check_rows, read_bytes, read_json_object, write_atomic, write_jsonl
from harness.core.paths import UnsafePath, contained

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
    "annotations",
    "annotators",
    "split",
    "feedback",
)
CLIP_FIELDS = ("id", "audio", "caption", "title", "aspects")
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
    except (datasets.exceptions.DatasetsError, ValueError, TypeError, OSError) as exc:
        reason = first_line(exc)
        raise HarnessError(f"{uri}: cannot load the dataset ({reason[:300]})") from None
    if not isinstance(loaded, datasets.Dataset):
        splits = list(loaded)
        split = table.split or (splits[0] if len(splits) == 1 else "train")
        if split not in loaded:
            raise HarnessError(f"{uri}: no split {split!r} (splits: {', '.join(splits)})")
        loaded, origin = loaded[split], origin | {"split": split}
    check_rows(uri, loaded.num_rows)
    return loaded, origin


def _column(data: datasets.Dataset, mapping: _Table, field: str, *, required: bool) -> str | None:
    given = None if field == "split" else getattr(mapping, field)  # `split:` names the table
    name = given or field
    if name in data.column_names:
        return str(name)
    if given is not None or required:
        known = ", ".join(data.column_names)
        what = f"columns.{type(mapping).__name__.removesuffix('Columns').lower()}s.{field}"
        raise HarnessError(f"{what}: no column {name!r} (columns: {known})")
    return None


def title_id(title: str) -> str:
    """A stable id for a song title as written (the same in every import and thread)."""
    return "song-" + hashlib.sha256(title.encode("utf-8")).hexdigest()[:12]


def _dialogue(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, str):
        return [{"speaker": "user", "text": value}] if value.strip() else []
    if isinstance(value, Mapping):  # a struct of lists, as `datasets` stores a list of structs
        value = [
            {"speaker": s, "text": t}
            for s, t in zip(value.get("speaker") or [], value.get("text") or [], strict=True)
        ]
    if not isinstance(value, list) or not all(isinstance(turn, Mapping) for turn in value):
        raise ValueError("expected a string or turns ({speaker, text} each)")
    return [dict(turn) for turn in value]


def _ids(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str | int) for v in value):
        raise ValueError(f"expected a list of ids, not {type(value).__name__}")
    return [str(v) for v in value]


def _field(field: str, value: Any, titles: dict[str, str] | None) -> Any:
    """An item field from its cell (ValueError when the cell is not of its type)."""
    if field == "dialogue":
        return _dialogue(value)
    if field == "id":
        return str(value)
    if field in ("candidates", "human_ranking", "relevant"):
        ids = _ids(value)
        return ids if titles is None else [_title(titles, t) for t in ids]
    if field == "annotations":
        if not isinstance(value, list):
            raise ValueError(f"expected a list of rankings, not {type(value).__name__}")
        return [_field("human_ranking", ranking, titles) for ranking in value]
    if field == "relevance":
        if not isinstance(value, Mapping):
            raise ValueError(f"expected a mapping of ids to gains, not {type(value).__name__}")
        return {
            (_title(titles, str(t)) if titles is not None else str(t)): g for t, g in value.items()
        }
    return value


def _items(
    data: datasets.Dataset, mapping: ItemColumns, titles: dict[str, str] | None, uri: str
) -> Iterator[dict[str, Any]]:
    cols = {f: _column(data, mapping, f, required=f in ("id", "candidates")) for f in ITEM_FIELDS}
    wanted = [c for c in cols.values() if c is not None]
    for index, row in enumerate(data.select_columns(wanted)):
        item: dict[str, Any] = {}
        for field, col in cols.items():
            value = row[col] if col is not None else None
            if value is None:
                continue
            try:
                item[field] = _field(field, value, titles)
            except (ValueError, TypeError) as exc:
                raise HarnessError(f"{uri}: items row {index}: {field} ({col}): {exc}") from None
        yield item


def _title(titles: dict[str, str], title: str) -> str:
    cid = title_id(title)
    titles.setdefault(cid, title)
    return cid


def _cell_bytes(value: Any, roots: Sequence[Path]) -> bytes:
    """The audio bytes of a cell: its bytes, its array encoded as WAV, or the file it names
    inside the source's folder or the `datasets` cache (`roots`); ValueError otherwise."""
    if isinstance(value, Mapping) and value.get("bytes"):
        return bytes(value["bytes"])
    if isinstance(value, Mapping) and value.get("array") is not None:
        rate = value.get("sampling_rate")
        if not isinstance(rate, int) or isinstance(rate, bool) or not 0 < rate <= 1_000_000:
            raise ValueError(f"sampling rate {rate!r} is not a positive number of Hz")
        buffer = io.BytesIO()
        try:
            soundfile.write(
                buffer, np.asarray(value["array"], dtype=np.float32), rate, format="WAV"
            )
        except (TypeError, ValueError, RuntimeError, soundfile.LibsndfileError) as exc:
            raise ValueError(f"the array cannot be written as audio ({exc})") from None
        return buffer.getvalue()
    path = value.get("path") if isinstance(value, Mapping) else value
    if not isinstance(path, str) or not path:
        raise ValueError("no audio bytes, array or file in the cell")
    return read_bytes(_inside(path, roots), limit=MAX_CLIP_BYTES)


def _inside(path: str, roots: Sequence[Path]) -> Path:
    """The file an audio cell names: relative to the source's folder, or absolute inside
    one of `roots` (a `datasets` cache holds absolute paths); never anywhere else."""
    if not os.path.isabs(path):
        return contained(roots[0], path, "audio path")
    normal = Path(os.path.normpath(path))
    if not any(normal.is_relative_to(root.resolve()) for root in roots):
        raise UnsafePath(f"audio path {path!r} lies outside the source's folder; not read")
    return normal


def _audio_file(value: Any, audio_dir: Path, where: str, roots: Sequence[Path]) -> str:
    """Write the audio of one cell under `audio_dir` as <sha256>.<format>; its file name."""
    try:
        data = _cell_bytes(value, roots)
    except ValueError as exc:  # UnsafePath included
        raise HarnessError(f"{where}: {exc}") from None
    try:
        info = soundfile.info(io.BytesIO(data))
    except (RuntimeError, soundfile.LibsndfileError) as exc:
        raise HarnessError(f"{where}: audio soundfile cannot read ({exc})") from None
    if info.frames == 0:
        raise HarnessError(f"{where}: the audio has no samples")
    name = f"{hashlib.sha256(data).hexdigest()}.{_FORMATS.get(info.format, 'wav')}"
    target = audio_dir / name
    if not target.is_file():
        write_atomic(target, data)
    return name


def _clips(
    data: datasets.Dataset,
    mapping: ClipColumns,
    audio_dir: Path,
    out: Path,
    uri: str,
    roots: Sequence[Path],
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
        for field in ("caption", "title", "aspects"):
            col = cols[field]
            if col is not None and row[col] is not None:
                clip[field] = _ids(row[col]) if field == "aspects" else str(row[col])
        if audio is not None and row[audio] is not None:
            where = f"{uri}: clips row {index} ({audio})"
            name = _audio_file(row[audio], audio_dir, where, roots)
            clip["audio"] = f"{relative}/{name}"
        yield clip


def materialize(source: HFSource, out: Path | None = None, *, rows: str | None = None) -> Path:
    """Write `source` as a dataset folder (by default `folder_for(source)`), unless the
    folder already holds the same data (the fingerprints in its source.json); the folder.
    `rows`: the file of a protocol's own dataset form, which the rows of `columns.items`'
    split are written to as they are, one JSON line each."""
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
        "fields": [*ITEM_FIELDS, *CLIP_FIELDS],  # a folder written reading fewer is written again
    } | ({"rows": rows} if rows else {})
    if clips_origin and clips_origin.get("split"):
        record["clips_split"] = clips_origin["split"]
    if read_source(out) == record:
        return out
    out.mkdir(parents=True, exist_ok=True)
    if rows is not None:
        write_jsonl(out / rows, items_data, default=_plain)
        write_atomic(out / SOURCE_FILE, json.dumps(record, indent=2) + "\n")
        return out
    titles: dict[str, str] | None = {} if clips_data is None else None
    items = list(_items(items_data, columns.items, titles, source.uri))
    if clips_data is not None and columns.clips is not None:
        roots = _roots(source.uri)
        clips = list(_clips(clips_data, columns.clips, out / "audio", out, source.uri, roots))
    else:
        clips = [{"id": cid, "title": title} for cid, title in (titles or {}).items()]
    write_jsonl(out / "items.jsonl", items, default=_plain)
    write_jsonl(out / "clips.jsonl", clips, default=_plain)
    try:
        load_dataset(out)
    except DatasetError as exc:  # line N of items.jsonl is row N - 1 of its table (from 0)
        where = f"{Path(exc.path).stem} row {exc.line - 1}" if exc.line else Path(exc.path).name
        raise HarnessError(f"{source.uri}: {where}: {exc.reason} (written to {out})") from None
    write_atomic(out / SOURCE_FILE, json.dumps(record, indent=2) + "\n")
    return out


def _roots(uri: str) -> list[Path]:
    """Where an audio cell's file may lie: the source's folder (relative paths are read from
    it), and the `datasets` cache."""
    import datasets

    cache = Path(datasets.config.HF_DATASETS_CACHE)
    if uri.startswith(HF_PREFIX):
        return [cache]
    local = Path(uri)
    return [local if local.is_dir() else local.parent, cache]


def read_source(folder: Path) -> dict[str, Any] | None:
    """The source.json of a dataset folder written from a Hugging Face dataset; None when
    there is none or it cannot be read (a kill during its write: it is written again)."""
    path = Path(folder) / SOURCE_FILE
    if not path.is_file():
        return None
    try:
        return read_json_object(path)
    except HarnessError:
        return None


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
