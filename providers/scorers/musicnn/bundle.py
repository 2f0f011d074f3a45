"""A reader of TensorFlow's TensorBundle checkpoints (`<prefix>.index` + `<prefix>.data-*`),
with no TensorFlow."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

TABLE_MAGIC = 0xDB4775248B80FB57
FOOTER_SIZE = 48
BLOCK_TRAILER_SIZE = 5  # compression type byte + masked crc32c

# tensorflow/core/framework/types.proto -> numpy (little-endian), for the dtypes a
# checkpoint of numbers can hold.
DTYPES: dict[int, np.dtype[np.generic]] = {
    1: np.dtype("<f4"),
    2: np.dtype("<f8"),
    3: np.dtype("<i4"),
    4: np.dtype("u1"),
    5: np.dtype("<i2"),
    6: np.dtype("i1"),
    9: np.dtype("<i8"),
    10: np.dtype("?"),
    17: np.dtype("<u2"),
    19: np.dtype("<f2"),
    22: np.dtype("<u4"),
    23: np.dtype("<u8"),
}


class BundleFormatError(ValueError):
    """The bytes are not a TensorBundle this reader understands."""


@dataclass(frozen=True, slots=True)
class BundleEntry:  # where one tensor lives (the fields of `BundleEntryProto` used here)
    dtype: int
    shape: tuple[int, ...]
    shard_id: int
    offset: int
    size: int


@dataclass(frozen=True, slots=True)
class BundleIndex:
    num_shards: int
    entries: dict[str, BundleEntry]


# ------------------------------------------------------------------ protobuf wire format
def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise BundleFormatError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(message: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) pairs of a protobuf message: ints for varint and fixed
    fields, bytes for length-delimited ones."""
    out: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(message):
        key, pos = _varint(message, pos)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, pos = _varint(message, pos)
        elif wire == 1:
            (value,) = struct.unpack_from("<Q", message, pos)
            pos += 8
        elif wire == 5:
            (value,) = struct.unpack_from("<I", message, pos)
            pos += 4
        elif wire == 2:
            length, pos = _varint(message, pos)
            value = message[pos : pos + length]
            pos += length
        else:
            raise BundleFormatError(f"unsupported protobuf wire type {wire}")
        out.append((number, value))
    if pos != len(message):
        raise BundleFormatError("truncated protobuf message")
    return out


def _int(value: int | bytes) -> int:
    if isinstance(value, bytes):
        raise BundleFormatError("expected a number, got a length-delimited field")
    return value


def _bytes(value: int | bytes) -> bytes:
    if not isinstance(value, bytes):
        raise BundleFormatError("expected a length-delimited field, got a number")
    return value


def _shape(message: bytes) -> tuple[int, ...]:
    """`TensorShapeProto`: repeated `dim` (field 2), each with `size` (field 1)."""
    dims = []
    for number, value in _fields(message):
        if number == 2:
            sizes = [_int(v) for n, v in _fields(_bytes(value)) if n == 1]
            dims.append(sizes[0] if sizes else 0)
        elif number == 3 and _int(value):
            raise BundleFormatError("tensor of unknown rank")
    return tuple(dims)


def parse_entry(message: bytes) -> BundleEntry:
    values: dict[int, int | bytes] = {}
    for number, value in _fields(message):
        if number == 7:
            raise BundleFormatError("partitioned (sliced) tensors are not supported")
        values[number] = value
    return BundleEntry(
        dtype=_int(values.get(1, 0)),
        shape=_shape(_bytes(values.get(2, b""))),
        shard_id=_int(values.get(3, 0)),
        offset=_int(values.get(4, 0)),
        size=_int(values.get(5, 0)),
    )


# ------------------------------------------------------------------ SSTable
def _block(table: bytes, handle: bytes) -> bytes:
    offset, pos = _varint(handle, 0)
    size, _ = _varint(handle, pos)
    if offset + size + BLOCK_TRAILER_SIZE > len(table):
        raise BundleFormatError("block handle points past the end of the index file")
    if table[offset + size] != 0:
        raise BundleFormatError("compressed table blocks are not supported")
    return table[offset : offset + size]


def _block_items(block: bytes) -> list[tuple[bytes, bytes]]:
    """Key/value pairs of one block; each key shares a prefix with the one before it."""
    if len(block) < 4:
        raise BundleFormatError("table block too short")
    (n_restarts,) = struct.unpack_from("<I", block, len(block) - 4)
    end = len(block) - 4 - 4 * n_restarts
    if end < 0:
        raise BundleFormatError("bad restart count in table block")
    items: list[tuple[bytes, bytes]] = []
    key = b""
    pos = 0
    while pos < end:
        shared, pos = _varint(block, pos)
        unshared, pos = _varint(block, pos)
        value_size, pos = _varint(block, pos)
        key = key[:shared] + block[pos : pos + unshared]
        pos += unshared
        items.append((key, block[pos : pos + value_size]))
        pos += value_size
    if pos != end:
        raise BundleFormatError("table block entries overrun the restart array")
    return items


def table_items(table: bytes) -> list[tuple[bytes, bytes]]:
    """Every key/value pair of an SSTable, in key order."""
    if len(table) < FOOTER_SIZE:
        raise BundleFormatError("index file too short for a table footer")
    footer = table[-FOOTER_SIZE:]
    (magic,) = struct.unpack_from("<Q", footer, FOOTER_SIZE - 8)
    if magic != TABLE_MAGIC:
        raise BundleFormatError("not a TensorBundle index (bad table magic)")
    _, pos = _varint(footer, 0)  # metaindex handle: offset, size (unused)
    _, pos = _varint(footer, pos)
    index_block = _block(table, footer[pos:])
    return [
        item
        for _, handle in _block_items(index_block)
        for item in _block_items(_block(table, handle))
    ]


def parse_index(index: bytes) -> BundleIndex:
    num_shards = 1
    entries: dict[str, BundleEntry] = {}
    for key, value in table_items(index):
        if key == b"":
            header = dict(_fields(value))
            num_shards = _int(header.get(1, 1))
            if _int(header.get(2, 0)) != 0:
                raise BundleFormatError("big-endian checkpoints are not supported")
        else:
            entries[key.decode()] = parse_entry(value)
    return BundleIndex(num_shards, entries)


def read_tensors(index: bytes, shards: Sequence[bytes]) -> dict[str, NDArray[np.generic]]:
    """Every tensor of a bundle, by name; `shards[i]` is the content of
    `<prefix>.data-<i>-of-<n>`. Arrays are copies (writable, independent of the bytes)."""
    bundle = parse_index(index)
    if bundle.num_shards != len(shards):
        raise BundleFormatError(f"bundle has {bundle.num_shards} data shards, got {len(shards)}")
    tensors: dict[str, NDArray[np.generic]] = {}
    for name, entry in bundle.entries.items():
        if entry.dtype not in DTYPES:
            raise BundleFormatError(f"{name}: unsupported dtype enum {entry.dtype}")
        dtype = DTYPES[entry.dtype]
        count = int(np.prod(entry.shape, dtype=np.int64))
        if count * dtype.itemsize != entry.size:
            raise BundleFormatError(f"{name}: {entry.size} bytes do not fit shape {entry.shape}")
        data = shards[entry.shard_id]
        if entry.offset + entry.size > len(data):
            raise BundleFormatError(f"{name}: data shard {entry.shard_id} is truncated")
        flat = np.frombuffer(data, dtype=dtype, count=count, offset=entry.offset)
        tensors[name] = flat.reshape(entry.shape).copy()
    return tensors
