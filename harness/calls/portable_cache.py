"""Moving answers between machines: the portable cache file (docs/formats.md: gzip JSON lines, a
header, one `{"key", "value"}` line per answer, a counting end line so a truncated copy is
refused), and seeds (`cache: {seed: PATH}`), a folder or a file read only on a miss."""

from __future__ import annotations

import gzip
import json
import os
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness._version import __version__
from harness.calls.cache import CACHE_SCHEMA_VERSION, DamagedEntry, JsonDisk, ResponseCache, Seed
from harness.core.errors import DatasetError, HarnessError, StorageError
from harness.core.files import gzip_lines, parse_json, text_lines

FORMAT = "bgm-judge-cache"
FORMAT_VERSION = 1
KEYS_FILE = "cache_keys.txt"  # in a run folder: the keys of the answers the run used


@dataclass(frozen=True)
class Exported:
    written: int
    missing: int  # keys a run used that the cache no longer holds


@dataclass(frozen=True)
class Imported:
    added: int
    kept: int  # keys the cache held already: their answers are kept as they were


def write_run_keys(folder: Path, keys: Iterable[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / KEYS_FILE).write_text("".join(f"{key}\n" for key in sorted(set(keys))))


def run_keys(folder: Path) -> list[str]:
    path = folder / KEYS_FILE
    if not path.is_file():
        what = "a run folder" if (folder / "config.yaml").is_file() else "not a run folder"
        raise HarnessError(
            f"--run {folder}: {what} without {KEYS_FILE} (written when a run finishes, "
            "since harness 0.3); export the whole cache with --all instead"
        )
    return [line.strip() for _, line in text_lines(path)]


def export_cache(cache: ResponseCache, out: Path, keys: Iterable[str] | None = None) -> Exported:
    wanted = sorted(set(cache.keys() if keys is None else keys))
    written = missing = 0
    tmp = out.with_name(out.name + ".tmp")
    try:
        # no file name and no time in the gzip header: the same answers, the same bytes
        with tmp.open("wb") as handle, gzip.GzipFile("", "wb", fileobj=handle, mtime=0) as raw:
            header = {
                "format": FORMAT,
                "version": FORMAT_VERSION,
                "cache_schema": CACHE_SCHEMA_VERSION,
                "harness": __version__,
            }
            raw.write(_line(header))
            for key in wanted:
                value = cache.get(key)
                if value is None:
                    missing += 1
                    continue
                raw.write(_line({"key": key, "value": value}))
                written += 1
            raw.write(_line({"end": True, "entries": written}))
        os.replace(tmp, out)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise StorageError(f"cannot write {out}: {exc.strerror or exc}") from None
    return Exported(written, missing)


def _line(value: dict[str, Any]) -> bytes:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return (text + "\n").encode("utf-8")


def read_portable(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(key, answer) of each entry; DatasetError names the file, the line and the fault."""
    entries = line_no = 0
    ended = False
    for line_no, raw in gzip_lines(path, missing="cache file not found"):
        if ended:
            raise DatasetError(path, line_no, "a line after the end line")
        entry = parse_json(raw, path, line_no)
        if not isinstance(entry, dict):
            raise DatasetError(path, line_no, "expected a JSON object")
        if line_no == 1:
            _check_header(path, entry)
        elif "end" in entry:
            if entry.get("entries") != entries:
                raise DatasetError(
                    path,
                    line_no,
                    f"the end line counts {entry.get('entries')} entries, not {entries}",
                )
            ended = True
        else:
            key, value = entry.get("key"), entry.get("value")
            if not isinstance(key, str) or not isinstance(value, dict):
                raise DatasetError(path, line_no, "expected {'key': string, 'value': object}")
            if not key.isascii():  # a cache key is a hex digest; "\ud800" is no text at all
                raise DatasetError(path, line_no, "the key is not a cache key (ASCII text)")
            entries += 1
            yield key, value
    if line_no == 0:
        raise DatasetError(path, None, "empty file: not a bgm-judge cache export")
    if not ended:
        raise DatasetError(path, line_no, "no end line: the file is truncated")


def _check_header(path: Path, header: dict[str, Any]) -> None:
    if header.get("format") != FORMAT:
        raise DatasetError(path, 1, f"not a bgm-judge cache export (no {FORMAT!r} header)")
    version = header.get("version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise DatasetError(
            path,
            1,
            f"format version {version!r}: written by a newer harness (this one reads "
            f"version {FORMAT_VERSION} and older); upgrade bgm-judge",
        )
    if header.get("cache_schema") != CACHE_SCHEMA_VERSION:
        raise DatasetError(
            path,
            1,
            f"cache keys of schema {header.get('cache_schema')!r}, this harness's are "
            f"{CACHE_SCHEMA_VERSION}: none of its answers would be found",
        )


def import_cache(cache: ResponseCache, path: Path) -> Imported:
    """Add the file's answers, never replacing one (a damaged file adds nothing)."""
    count = sum(1 for _ in read_portable(path))
    added = kept = 0
    for key, value in read_portable(path):
        if cache.add(key, value):
            added += 1
        else:
            kept += 1
    assert added + kept == count
    return Imported(added, kept)


class FileSeed:
    def __init__(self, path: Path) -> None:
        self._answers = dict(read_portable(path))

    def get(self, key: str) -> dict[str, Any] | None:
        return self._answers.get(key)

    def close(self) -> None:
        self._answers = {}


class FolderSeed:
    """Another cache folder, read without writing there: immutable when closed (no WAL beside
    it), else read-only so its latest answers are seen."""

    def __init__(self, directory: Path) -> None:
        database = directory / "cache.db"
        if not database.is_file():
            raise HarnessError(f"seed cache {directory}: not a response cache (no cache.db)")
        self.directory = directory
        self._disk = JsonDisk(str(directory))
        live = database.with_name("cache.db-wal").exists()
        uri = f"{database.resolve().as_uri()}?{'mode=ro' if live else 'immutable=1'}"
        try:
            self._db = sqlite3.connect(uri, uri=True)
            self._db.execute("SELECT 1 FROM Cache LIMIT 1").fetchall()
        except sqlite3.Error as exc:
            raise StorageError(f"cannot read the seed cache {directory}: {exc}") from None

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            row = self._db.execute(
                "SELECT mode, filename, value FROM Cache WHERE key = ? AND raw = 1", (key,)
            ).fetchone()
        except sqlite3.Error as exc:
            raise StorageError(f"cannot read the seed cache {self.directory}: {exc}") from None
        if row is None:
            return None
        mode, filename, value = row
        try:
            answer = self._disk.fetch(mode, filename, value, False)
        except DamagedEntry:
            return None
        return answer if isinstance(answer, dict) else None

    def close(self) -> None:
        self._db.close()


def open_seed(path: Path) -> Seed:
    if path.is_dir():
        return FolderSeed(path)
    if path.is_file():
        return FileSeed(path)
    raise HarnessError(f"seed cache {path} not found (a cache folder or an exported file)")
