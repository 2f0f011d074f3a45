"""One reading layer (issue 43 item 6, issue 48): every file the harness reads back that it
did not just write in this process (run folders, shards, caches and their exports, seed
caches, predictions, TREC files, Hugging Face materialisations, ledgers, Parquet, summaries,
tracker folders, datasets) is opened and decoded by `harness.core.files`, which bounds what
it reads and names the file, line and field of what it refuses.

This test reads every module of the package (harness/ and providers/) and fails when one
outside the layer opens a file for reading or decodes one itself: `open(...)` for reading,
`Path.read_text/read_bytes`, `json.load(s)`, `pickle.load(s)`, `yaml.*load`, `gzip.open`,
`zlib.decompress`, `pq.read_table`, `pd.read_*`. Writing is not reading; the few modules
that read something else (a request body, the kernel's /proc, the package's own files) are
listed in ALLOWED with the reason."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYER = {"harness/core/files.py", "harness/core/yaml_files.py"}
# module (or folder/) -> why it may read without the layer
ALLOWED = {
    "harness/fake_api/": "the fake API server's own request bodies (a test double, no file)",
    "harness/construct/annotate/app.py": "the package's own page (importlib.resources)",
    "harness/calls/claims.py": "/proc/PID/stat: the kernel's account of a claim's holder",
    "providers/api/_bounded_body.py": "HTTP bodies inflated under MAX_BODY_BYTES (no file)",
}

_OPENERS = {"gzip", "bz2", "lzma", "tarfile", "io", "codecs", "wave", "zipfile"}
_DECODERS = {
    "json": {"load", "loads"},
    "orjson": {"loads"},
    "pickle": {"load", "loads", "Unpickler"},
    "gzip": {"decompress"},
    "zlib": {"decompress", "decompressobj"},
    "pq": {"read_table", "ParquetFile", "read_schema", "read_metadata"},
    "pd": {"read_parquet", "read_json", "read_csv", "read_pickle"},
    "os": {"open", "read"},
}


def _modules() -> Iterator[tuple[str, ast.Module]]:
    for package in ("harness", "providers"):
        for path in sorted((ROOT / package).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            yield name, ast.parse(path.read_text(encoding="utf-8"), filename=name)


def _allowed(name: str) -> bool:
    return name in LAYER or any(
        name == entry or (entry.endswith("/") and name.startswith(entry)) for entry in ALLOWED
    )


def _mode(call: ast.Call, position: int) -> str | None:
    """The mode string an open-like call is given (None when it is not a constant)."""
    for keyword in call.keywords:
        if keyword.arg == "mode":
            node: ast.expr | None = keyword.value
            break
    else:
        node = call.args[position] if len(call.args) > position else ast.Constant("r")
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _reads(mode: str | None) -> bool:
    return mode is None or not set(mode) & set("wax")


def _in_memory(call: ast.Call) -> bool:
    """`wave.open(io.BytesIO(data))`: bytes already in memory, no file."""
    first = call.args[0] if call.args else None
    return isinstance(first, ast.Call) and "BytesIO" in ast.unparse(first.func)


def _offences(tree: ast.Module) -> Iterator[tuple[int, str]]:
    json_text_loads = any(
        isinstance(node, ast.ImportFrom)
        and node.module == "harness.core.json_text"
        and any(alias.name == "loads" for alias in node.names)
        for node in ast.walk(tree)
    )
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            owner, name = node.value.id, node.attr
            if name in _DECODERS.get(owner, ()):
                yield node.lineno, f"{owner}.{name}"
            if owner == "yaml" and ("load" in name.lower() or name in ("compose", "parse")):
                yield node.lineno, f"yaml.{name}"
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        text = ast.unparse(func)
        if isinstance(func, ast.Name) and func.id == "open" and _reads(_mode(node, 1)):
            yield node.lineno, "open() for reading"
        elif isinstance(func, ast.Name) and func.id == "loads" and json_text_loads:
            yield node.lineno, "json_text.loads"
        elif isinstance(func, ast.Attribute) and func.attr in ("read_text", "read_bytes"):
            yield node.lineno, text
        elif isinstance(func, ast.Attribute) and func.attr in ("open", "GzipFile"):
            owner = func.value.id if isinstance(func.value, ast.Name) else None
            if owner == "webbrowser" or _in_memory(node):
                continue
            module_level = owner in _OPENERS
            if _reads(_mode(node, 1 if module_level else 0)):
                yield node.lineno, f"{text}() for reading"


def test_only_the_reading_layer_opens_and_decodes_files() -> None:
    found = [
        f"{name}:{line}: {what}"
        for name, tree in _modules()
        if not _allowed(name)
        for line, what in _offences(tree)
    ]
    assert not found, (
        "read these through harness.core.files (or list the module in ALLOWED with the "
        "reason):\n" + "\n".join(found)
    )


def test_the_scan_finds_each_kind_of_read() -> None:
    source = """
import gzip, json, pickle, yaml, zlib
import pyarrow.parquet as pq
from pathlib import Path
open(p)
open(p, "rb")
Path(p).open()
Path(p).read_text()
p.read_bytes()
json.loads(t)
pickle.loads(b)
yaml.safe_load(t)
gzip.open(p, "rb")
zlib.decompress(b)
pq.read_table(p)
"""
    found = [what for _, what in _offences(ast.parse(source))]
    assert len(found) == 11, found
    writes = """
import gzip, webbrowser, wave, io
open(p, "w")
Path(p).open("a", encoding="utf-8")
gzip.GzipFile("", "wb", fileobj=h)
webbrowser.open(url)
wave.open(io.BytesIO(data))
"""
    assert list(_offences(ast.parse(writes))) == []


def test_every_allowed_entry_exists_and_still_reads() -> None:
    modules = dict(_modules())
    for entry, reason in ALLOWED.items():
        assert reason.strip()
        named = [n for n in modules if n == entry or (entry.endswith("/") and n.startswith(entry))]
        assert named, f"{entry}: no such module (drop it from ALLOWED)"
        assert any(list(_offences(modules[n])) for n in named), (
            f"{entry}: reads nothing any more (drop it from ALLOWED)"
        )
