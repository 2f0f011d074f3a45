"""Where the musicnn checkpoints and tag names come from: the files of the `musicnn` 0.1.0
wheel (ISC licence), read as data. None of its Python modules is ever imported (they need
TensorFlow 1 and NumPy < 1.17)."""

from __future__ import annotations

import ast
import base64
import hashlib
import importlib.metadata
import importlib.util
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal, get_args

import numpy as np
from numpy.typing import NDArray

from harness.core.errors import DatasetError, HarnessError
from harness.core.files import read_bytes
from providers.scorers.musicnn.bundle import read_tensors

ModelName = Literal["MTT_musicnn", "MSD_musicnn", "MTT_vgg", "MSD_vgg"]
MODELS: Final[tuple[ModelName, ...]] = get_args(ModelName)
WHEEL_ENV: Final = "BGM_JUDGE_MUSICNN_WHEEL"
VERSION: Final = "0.1.0"
INSTALL_HINT: Final = f"pip install --no-deps musicnn=={VERSION}"
MAX_WEIGHTS_BYTES: Final = 1 << 30
_CHECKPOINT_FILES: Final = (".index", ".data-00000-of-00001")


class MusicnnWeightsError(HarnessError):
    """The musicnn weights are missing, incomplete or not the published ones."""


@dataclass(frozen=True)
class WeightsSource:
    """The files of one copy of the musicnn package, installed or inside a wheel."""

    location: Path
    is_wheel: bool

    def read(self, member: str) -> bytes:
        """A file of the package by its path inside it, e.g. `MTT_musicnn/.index`."""
        try:
            if self.is_wheel:
                with zipfile.ZipFile(self.location) as wheel:
                    return wheel.read(f"musicnn/{member}")
            return read_bytes(self.location / member, limit=MAX_WEIGHTS_BYTES)
        except (KeyError, OSError, zipfile.BadZipFile, DatasetError) as exc:
            raise MusicnnWeightsError(
                f"musicnn weights: cannot read {member} from {self.location} ({exc}); "
                f"reinstall them with: {INSTALL_HINT}"
            ) from None

    def record_hashes(self) -> dict[str, str]:
        """sha256 (urlsafe base64, as in RECORD) of each package file, by its path inside
        the package; empty when the copy has no RECORD."""
        if self.is_wheel:
            with zipfile.ZipFile(self.location) as wheel:
                record = wheel.read(f"musicnn-{VERSION}.dist-info/RECORD").decode()
            rows = [line.split(",") for line in record.splitlines() if line]
            pairs = [(row[0], row[1]) for row in rows if len(row) >= 2]
        else:
            try:
                files = importlib.metadata.distribution("musicnn").files or []
            except importlib.metadata.PackageNotFoundError:
                return {}
            pairs = [(str(f), f"{f.hash.mode}={f.hash.value}") for f in files if f.hash]
        return {
            path.removeprefix("musicnn/"): digest.removeprefix("sha256=")
            for path, digest in pairs
            if path.startswith("musicnn/") and digest.startswith("sha256=")
        }


def locate(wheel: str | os.PathLike[str] | None = None) -> WeightsSource:
    """The musicnn files to use (see the module docstring for the order)."""
    chosen = wheel if wheel is not None else os.environ.get(WHEEL_ENV) or None
    if chosen is not None:
        path = Path(chosen).expanduser()
        if not path.is_file():
            raise MusicnnWeightsError(
                f"musicnn wheel {path} does not exist; get it with: "
                f"pip download --no-deps musicnn=={VERSION} -d DIR"
            )
        return WeightsSource(path, is_wheel=True)
    spec = importlib.util.find_spec("musicnn")
    if spec is None or not spec.submodule_search_locations:
        raise MusicnnWeightsError(
            f"musicnn weights are not installed; install them with: {INSTALL_HINT} "
            f"(or set {WHEEL_ENV} to the wheel file)"
        )
    return WeightsSource(Path(next(iter(spec.submodule_search_locations))), is_wheel=False)


def load_checkpoint(
    model: ModelName, source: WeightsSource, verify: bool = True
) -> dict[str, NDArray[np.generic]]:
    """Every variable of one model's checkpoint, by its TensorFlow name."""
    if model not in MODELS:
        raise MusicnnWeightsError(f"unknown musicnn model {model!r} (known: {', '.join(MODELS)})")
    hashes = source.record_hashes() if verify else {}
    files = {}
    for suffix in _CHECKPOINT_FILES:
        member = f"{model}/{suffix}"
        data = source.read(member)
        expected = hashes.get(member)
        if expected is not None and _record_digest(data) != expected:
            raise MusicnnWeightsError(
                f"musicnn weights: {member} in {source.location} does not match the "
                f"published musicnn {VERSION}; reinstall with: {INSTALL_HINT}"
            )
        files[suffix] = data
    return read_tensors(files[".index"], [files[".data-00000-of-00001"]])


def tag_names(model: ModelName, source: WeightsSource) -> tuple[str, ...]:
    """The model's 50 tags, in output order, from `MTT_LABELS` / `MSD_LABELS` of
    musicnn/configuration.py."""
    wanted = f"{model.split('_')[0]}_LABELS"
    tree = ast.parse(source.read("configuration.py"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == wanted for t in node.targets
        ):
            labels = ast.literal_eval(node.value)
            if isinstance(labels, list) and all(isinstance(x, str) for x in labels):
                return tuple(labels)
    raise MusicnnWeightsError(f"musicnn configuration.py in {source.location} has no {wanted}")


def _record_digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
