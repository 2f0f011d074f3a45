"""The one reading layer: every file the harness reads back that it did not just write in
this process is opened and decoded here, as untrusted bytes (`tests/test_reading_layer.py`
fails when a module reads one itself). Only regular files are opened (a FIFO would hang);
sizes, line lengths, inflated data and decoded values (`bounded`) are bounded; whatever
cannot be read is one DatasetError line naming the file, the line and the reason. Files
others read back are written atomically (`write_atomic`, `write_jsonl`)."""

from __future__ import annotations

import gzip
import io
import itertools
import json
import os
import pickle
import pickletools
import stat
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from harness.core.errors import DatasetError, StorageError, first_line

MAX_DOCUMENT_BYTES = 64 << 20  # a JSON or YAML document read whole (run.json: a few KB)
MAX_LINE_BYTES = 16 << 20  # a line of a JSONL, TREC or portable-cache file
READ_BUFFER = 1 << 20  # a pool's line of 500 scores in one read, not sixty
# The most a decoded value may expand to when walked: a judge's answer holds a few values
# (with logprobs some 10,000), a shard's marker one id per item.
MAX_VALUE_NODES = 100_000
# A dataset line may hold a whole candidate pool (a MusiCRS thread of 100,000 titles).
MAX_POOL_VALUES = 1_000_000
MAX_VALUE_CHARS = 64_000_000
MAX_VALUE_DEPTH = 64
MAX_INT_BITS = 14_000  # Python prints at most 4,300 digits (about 14,300 bits)
# A gzip file is inflated up to MAX_INFLATION times its size (JSON answers with distinct
# keys inflate some 5 times, a compression bomb 1,000), and any file up to MIN_INFLATED_BYTES.
MAX_INFLATION = 250
MIN_INFLATED_BYTES = 64 << 20
MAX_TABLE_ROWS = 5_000_000  # a records table holds a row per call; repeated rows cost nothing


class TooLarge(ValueError):
    """A value that would expand beyond the bounds above when walked."""


def bounded(value: Any, max_values: int = MAX_VALUE_NODES) -> None:
    """Raise TooLarge when walking `value` (shared references expanded, as json.dumps would)
    exceeds the bounds above; stops as soon as it does, so shared leaves cost no more."""
    nodes = chars = 0
    level: list[Any] = [value]
    for _ in range(MAX_VALUE_DEPTH + 1):  # one level of the value at a time
        below: list[Any] = []
        for current in level:
            if isinstance(current, str | bytes):
                chars += len(current)
            elif isinstance(current, int) and current.bit_length() > MAX_INT_BITS:
                raise TooLarge("holds an integer of more than 4,300 digits")
            elif isinstance(current, dict):
                below.extend(current)
                below.extend(current.values())
            elif isinstance(current, list | tuple | set | frozenset):
                below.extend(current)
            if len(below) > max_values:
                break
        nodes += len(level)
        if nodes + len(below) > max_values or chars > MAX_VALUE_CHARS:
            raise TooLarge(f"expands to more than {max_values:,} values or 64 M characters")
        if not below:
            return
        level = below
    raise TooLarge(f"nested deeper than {MAX_VALUE_DEPTH} levels")


# --------------------------------------------------------------------------------- opening
@contextmanager
def open_file(
    path: Path, *, missing: str = "file not found", limit: int | None = None
) -> Iterator[io.BufferedReader[io.FileIO]]:
    """`path` opened for reading when it is a regular file (of at most `limit` bytes), without
    blocking (a FIFO is refused); DatasetError (`missing` when it is not there) otherwise."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise DatasetError(path, None, missing) from None
    except OSError as exc:
        raise DatasetError(path, None, f"cannot be read ({exc.strerror or exc})") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):  # (before FileIO, which refuses a folder itself)
        os.close(fd)
        raise DatasetError(path, None, "not a regular file (a folder, a FIFO or a device)")
    with io.BufferedReader(io.FileIO(fd, "rb"), READ_BUFFER) as handle:
        if limit is not None and info.st_size > limit:
            raise DatasetError(path, None, f"larger than {_size(limit)}; not read")
        yield handle


def _size(limit: int) -> str:
    return f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit:,} bytes"


def read_bytes(
    path: Path, *, limit: int = MAX_DOCUMENT_BYTES, missing: str = "file not found"
) -> bytes:
    """The bytes of a regular file of at most `limit` bytes."""
    with open_file(path, missing=missing, limit=limit) as handle:
        try:  # (a read of `limit` bytes would allocate them)
            return handle.read(os.fstat(handle.fileno()).st_size)
        except OSError as exc:
            raise DatasetError(path, None, f"cannot be read ({exc.strerror or exc})") from None


def decoded(data: bytes, path: Path | str) -> str:
    """`data` as UTF-8 text; DatasetError names the line that is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise DatasetError(path, line, f"not valid UTF-8 ({exc.reason})") from None


def read_text(
    path: Path, *, limit: int = MAX_DOCUMENT_BYTES, missing: str = "file not found"
) -> str:
    """The UTF-8 text of a regular file of at most `limit` bytes."""
    return decoded(read_bytes(path, limit=limit, missing=missing), path)


def sha256_of(path: Path) -> str:
    """SHA-256 of a regular file's bytes (any size), read a block at a time."""
    import hashlib

    with open_file(path) as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


# ------------------------------------------------------------------------------------ JSON
def parse_json(
    data: str | bytes,
    path: Path | str,
    line: int | None = None,
    *,
    max_values: int = MAX_VALUE_NODES,
) -> Any:
    """The JSON value of `data` (the file `path`, or its line `line`), bounded (`bounded`);
    DatasetError names the file, the line and the reason otherwise."""
    try:
        value = json.loads(data)
    except json.JSONDecodeError as exc:
        where = line if line is not None else exc.lineno
        reason = f"{exc.msg.removesuffix(' at')} at column {exc.colno}"
        raise DatasetError(path, where, f"not valid JSON ({reason})") from None
    except RecursionError:
        raise DatasetError(path, line, "not valid JSON (nested too deep)") from None
    except UnicodeDecodeError as exc:
        raise DatasetError(path, line, f"not valid UTF-8 ({exc.reason})") from None
    except ValueError:  # Python refuses integers of more than 4,300 digits
        reason = "not valid JSON (a number of more than 4,300 digits)"
        raise DatasetError(path, line, reason) from None
    # Text of at most one value per character that opens no more brackets than the depth
    # bound (JSON shares nothing) is within the bounds: only other text is walked.
    text = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if len(text) > max_values or text.count(b"[") + text.count(b"{") > MAX_VALUE_DEPTH:
        try:
            bounded(value, max_values)
        except TooLarge as exc:
            raise DatasetError(path, line, str(exc)) from None
    return value


def read_json(path: Path, *, max_values: int = MAX_VALUE_NODES) -> Any:
    """The JSON document of a file (at most MAX_DOCUMENT_BYTES)."""
    return parse_json(decoded(read_bytes(path), path), path, max_values=max_values)


def read_json_object(path: Path, *, max_values: int = MAX_VALUE_NODES) -> dict[str, Any]:
    """A file holding one JSON object."""
    value = read_json(path, max_values=max_values)
    if not isinstance(value, dict):
        raise DatasetError(path, None, f"expected a JSON object, not {type(value).__name__}")
    return value


# ----------------------------------------------------------------------------------- lines
def lines(
    path: Path, *, missing: str = "file not found", limit: int = MAX_LINE_BYTES
) -> Iterator[tuple[int, bytes]]:
    """(line number, bytes) of every line, a last one without its newline included; a line
    longer than `limit` bytes is refused as soon as `limit` of it is read."""
    with open_file(path, missing=missing) as handle:
        yield from _bounded_lines(path, handle, limit)


def _bounded_lines(
    path: Path, handle: io.BufferedIOBase, limit: int
) -> Iterator[tuple[int, bytes]]:
    for line_no in itertools.count(1):
        try:
            line = handle.readline(limit + 1)
        except OSError as exc:
            raise DatasetError(path, line_no, f"cannot be read ({exc.strerror or exc})") from None
        if not line:
            return
        if len(line) > limit:
            raise DatasetError(path, line_no, f"a line longer than {_size(limit)}")
        yield line_no, line


def decoded_line(path: Path, line_no: int, raw: bytes) -> str | None:
    """A line's text; None if it is blank; DatasetError names a line that is not UTF-8."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetError(path, line_no, f"not valid UTF-8 ({exc.reason})") from None
    return line if line and not line.isspace() else None  # (strip() would copy every line)


def text_lines(path: Path, missing: str = "file not found") -> Iterator[tuple[int, str]]:
    """(line number, text) for each non-blank line, decoded as UTF-8."""
    for line_no, raw in lines(path, missing=missing):
        line = decoded_line(path, line_no, raw)
        if line is not None:
            yield line_no, line


def read_jsonl(
    path: Path, missing: str = "file not found", *, max_values: int = MAX_VALUE_NODES
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line of a JSONL file."""
    for line_no, line in text_lines(path, missing):
        value = parse_json(line, path, line_no, max_values=max_values)
        if not isinstance(value, dict):
            raise DatasetError(path, line_no, "expected a JSON object")
        yield line_no, value


def gzip_lines(
    path: Path, *, missing: str = "file not found", limit: int = MAX_LINE_BYTES
) -> Iterator[tuple[int, bytes]]:
    """The lines of a gzip file, inflated a line at a time (`limit` as `lines`)."""
    line_no = inflated = 0
    with open_file(path, missing=missing) as raw:
        bound = max(MIN_INFLATED_BYTES, MAX_INFLATION * os.fstat(raw.fileno()).st_size)
        try:
            with gzip.GzipFile(fileobj=raw, mode="rb") as handle:
                for line_no, line in _bounded_lines(path, handle, limit):
                    inflated += len(line)
                    if inflated > bound:
                        reason = f"inflates to more than {MAX_INFLATION} times its size; not read"
                        raise DatasetError(path, line_no, reason)
                    yield line_no, line
        except (OSError, EOFError, zlib.error) as exc:
            where = line_no + 1 if line_no else None
            raise DatasetError(path, where, f"not a complete gzip file ({exc})") from None


# ----------------------------------------------------------------------------- other forms
def read_parquet(path: Path) -> Any:
    """A Parquet file of at most MAX_TABLE_ROWS rows as a pyarrow Table."""
    import pyarrow.parquet as pq

    with open_file(path) as handle:
        try:
            parquet = pq.ParquetFile(handle)
            check_rows(path, parquet.metadata.num_rows)
            return parquet.read()
        except (OSError, ValueError, TypeError, MemoryError) as exc:  # ArrowInvalid: ValueError
            raise DatasetError(
                path, None, f"not a readable Parquet file ({first_line(exc)})"
            ) from None


def check_rows(path: Path | str, rows: int) -> None:
    """DatasetError when a table (a Parquet file, a Hugging Face split) is too long to read."""
    if rows > MAX_TABLE_ROWS:
        raise DatasetError(path, None, f"more than {MAX_TABLE_ROWS:,} rows; not read")


# Opcodes that build only None, booleans, numbers, strings, bytes, lists, tuples, sets and
# dicts: what an answer pickled by an older harness holds.
_PLAIN_OPCODES = frozenset(
    [
        "PROTO",
        "FRAME",
        "STOP",
        "MARK",
        "POP",
        "POP_MARK",
        "DUP",
        "NONE",
        "NEWTRUE",
        "NEWFALSE",
        "INT",
        "BININT",
        "BININT1",
        "BININT2",
        "LONG",
        "LONG1",
        "LONG4",
        "FLOAT",
        "BINFLOAT",
        "UNICODE",
        "SHORT_BINUNICODE",
        "BINUNICODE",
        "BINUNICODE8",
        "BINBYTES",
        "SHORT_BINBYTES",
        "BINBYTES8",
        "EMPTY_LIST",
        "APPEND",
        "APPENDS",
        "LIST",
        "EMPTY_TUPLE",
        "TUPLE",
        "TUPLE1",
        "TUPLE2",
        "TUPLE3",
        "EMPTY_DICT",
        "DICT",
        "SETITEM",
        "SETITEMS",
        "EMPTY_SET",
        "ADDITEMS",
        "FROZENSET",
        "PUT",
        "BINPUT",
        "LONG_BINPUT",
        "MEMOIZE",
        "GET",
        "BINGET",
        "LONG_BINGET",
    ]
)


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"{module}.{name} refused")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("persistent ids refused")


def plain_pickle(data: bytes) -> Any:
    """A value an older harness pickled, as bounded plain data (an opcode that could name or
    call something is refused before loading); ValueError otherwise."""
    try:
        for opcode, _, _ in pickletools.genops(data):
            if opcode.name not in _PLAIN_OPCODES:
                raise ValueError(f"pickle opcode {opcode.name} refused")
        value = _PlainUnpickler(io.BytesIO(data)).load()
    except ValueError:
        raise
    except Exception as exc:
        raise ValueError(f"{type(exc).__name__}: {exc}") from None
    bounded(value)
    return value


# --------------------------------------------------------------------------------- writing
def write_atomic(path: Path, data: str | bytes) -> None:
    """Replace `path` with `data` (text as UTF-8) in one step; StorageError on failure."""
    body = data.encode("utf-8") if isinstance(data, str) else data
    _replace(path, lambda handle: handle.write(body))


def write_jsonl(path: Path, rows: Iterable[Any], *, default: Any = None) -> int:
    """One JSON value a line (UTF-8, `ensure_ascii=False`), written atomically; the count."""
    count = 0

    def write(handle: IO[bytes]) -> None:
        nonlocal count
        for row in rows:
            handle.write((json.dumps(row, ensure_ascii=False, default=default) + "\n").encode())
            count += 1

    _replace(path, write)
    return count


def _replace(path: Path, write: Any) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tmp.open("wb") as handle:
            write(handle)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise StorageError(f"cannot write {path}: {exc.strerror or exc}") from None
