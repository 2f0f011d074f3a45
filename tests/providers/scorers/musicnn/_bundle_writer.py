"""A minimal TensorBundle writer for tests: the inverse of providers.scorers.musicnn.bundle, written
from the format's description (LevelDB table + BundleEntryProto), so the reader is tested
on bundles whose every byte the test controls."""

from __future__ import annotations

import struct

import numpy as np
from numpy.typing import NDArray

from providers.scorers.musicnn.bundle import DTYPES, TABLE_MAGIC

DTYPE_ENUMS = {dtype.str: enum for enum, dtype in DTYPES.items()}


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field_varint(number: int, value: int) -> bytes:
    return varint(number << 3) + varint(value)


def field_bytes(number: int, value: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(value)) + value


def entry_proto(dtype: int, shape: tuple[int, ...], offset: int, size: int) -> bytes:
    dims = b"".join(field_bytes(2, field_varint(1, d)) for d in shape)
    return (
        field_varint(1, dtype)
        + field_bytes(2, dims)
        + field_varint(4, offset)
        + field_varint(5, size)
        + varint(6 << 3 | 5)
        + struct.pack("<I", 0)  # crc32c (not checked by the reader)
    )


def block(items: list[tuple[bytes, bytes]], restart_interval: int = 2) -> bytes:
    """A table block with prefix-compressed keys and a restart point every few keys."""
    out = bytearray()
    restarts = []
    previous = b""
    for i, (key, value) in enumerate(items):
        if i % restart_interval == 0:
            restarts.append(len(out))
            shared = 0
        else:
            shared = len(_common_prefix(previous, key))
        out += varint(shared) + varint(len(key) - shared) + varint(len(value))
        out += key[shared:] + value
        previous = key
    for restart in restarts:
        out += struct.pack("<I", restart)
    out += struct.pack("<I", len(restarts))
    return bytes(out)


def _common_prefix(a: bytes, b: bytes) -> bytes:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


def write_bundle(
    tensors: dict[str, NDArray[np.generic]], block_size: int = 2
) -> tuple[bytes, bytes]:
    """(index bytes, data bytes) of a one-shard bundle; `block_size` entries per data block,
    so several data blocks (and a real index block) appear even for a few tensors."""
    data = bytearray()
    entries: list[tuple[bytes, bytes]] = [(b"", field_varint(1, 1))]  # header: 1 shard
    for name in sorted(tensors):
        array = np.asarray(tensors[name])  # (ascontiguousarray would make a scalar 1-D)
        raw = array.tobytes(order="C")  # this machine is little-endian, like the format
        enum = DTYPE_ENUMS[array.dtype.str]
        entries.append((name.encode(), entry_proto(enum, array.shape, len(data), len(raw))))
        data += raw
    table = bytearray()
    index_items = []
    for start in range(0, len(entries), block_size):
        chunk = entries[start : start + block_size]
        body = block(chunk)
        handle = varint(len(table)) + varint(len(body))
        table += body + b"\x00" + struct.pack("<I", 0)
        index_items.append((chunk[-1][0], handle))
    meta_handle = varint(len(table)) + varint(0)
    index_body = block(index_items)
    index_handle = varint(len(table)) + varint(len(index_body))
    table += index_body + b"\x00" + struct.pack("<I", 0)
    footer = (meta_handle + index_handle).ljust(40, b"\x00") + struct.pack("<Q", TABLE_MAGIC)
    return bytes(table + footer), bytes(data)
