"""all-mpnet-base-v2 assembled from its split wheels: checked against the pinned SHA-256,
unpacked once with a manifest, assembled again when damaged; the real model (when its
wheels are installed) scores through the text-embedding scorer under its own name."""

from __future__ import annotations

import asyncio
import hashlib
import io
import zipfile
from pathlib import Path

import pytest

from harness.config.experiment import provider_config
from harness.core.errors import HarnessError
from harness.core.types import ScoreCandidate, ScoreRequest
from providers import create_provider
from providers.scorers import _split_model
from providers.scorers._split_model import MANIFEST, MPNET, intact, mpnet_folder
from providers.scorers.text_embedding import TextEmbeddingScorer


def split_zip(folder: Path, files: dict[str, bytes], parts: int = 3) -> tuple[list[Path], str]:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(f"{MPNET}/{name}", data)
    whole = buffer.getvalue()
    size = -(-len(whole) // parts)
    paths = []
    for i in range(parts):
        path = folder / f"{MPNET}.zip.{i + 1:03d}"
        path.write_bytes(whole[i * size : (i + 1) * size])
        paths.append(path)
    return paths, hashlib.sha256(whole).hexdigest()


@pytest.fixture
def fake_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Parts of a small zip in place of the wheels; returns the models folder."""
    parts, digest = split_zip(tmp_path, {"config.json": b"{}", "model.bin": b"w" * 5000})
    monkeypatch.setattr(_split_model, "part_files", lambda: parts)
    monkeypatch.setattr(_split_model, "ZIP_SHA256", digest)
    monkeypatch.setenv("BGM_JUDGE_MODELS", str(tmp_path / "models"))
    return tmp_path / "models"


def test_assembles_once_and_checks_the_manifest(fake_parts: Path) -> None:
    folder = mpnet_folder()
    assert (folder / "model.bin").read_bytes() == b"w" * 5000
    assert intact(folder.parent)
    assert set((folder.parent / MANIFEST).read_text().split('"')) >= {f"{MPNET}/model.bin"}
    stamp = (folder / "model.bin").stat().st_mtime_ns
    assert mpnet_folder() == folder
    assert (folder / "model.bin").stat().st_mtime_ns == stamp  # not unpacked again


@pytest.mark.parametrize("damage", ["truncate", "delete", "manifest"])
def test_a_damaged_copy_is_assembled_again(fake_parts: Path, damage: str) -> None:
    folder = mpnet_folder()
    if damage == "truncate":
        (folder / "model.bin").write_bytes(b"w" * 10)
    elif damage == "delete":
        (folder / "config.json").unlink()
    else:
        (folder.parent / MANIFEST).write_text("{not json")
    assert not intact(folder.parent)
    assert mpnet_folder() == folder
    assert (folder / "model.bin").read_bytes() == b"w" * 5000
    assert intact(folder.parent)


def test_parts_that_do_not_make_the_pinned_zip_are_refused(
    fake_parts: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_split_model, "ZIP_SHA256", "0" * 64)
    with pytest.raises(HarnessError, match=r"do not make the pinned zip .*--force-reinstall"):
        mpnet_folder()
    assert not list(fake_parts.rglob("*.bin"))  # nothing half-made is left


def test_missing_parts_name_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_split_model, "PARTS", ("no-such-package-xyz==1",))
    with pytest.raises(HarnessError, match=r"^all-mpnet-base-v2 is not installed: pip install"):
        _split_model.part_files()


def _installed() -> bool:
    try:
        _split_model.part_files()
    except HarnessError:
        return False
    return True


@pytest.mark.slow
@pytest.mark.skipif(not _installed(), reason="the all-mpnet-base-v2 part wheels are not installed")
def test_the_real_model_scores_under_its_own_name() -> None:
    scorer = create_provider(provider_config(name="text-embedding", model=MPNET))
    assert isinstance(scorer, TextEmbeddingScorer)
    assert scorer.identity()["model"] == MPNET
    captions = [
        "aggressive heavy metal with screaming vocals and distorted guitars",
        "soft gentle piano lullaby, slow and calm, soothing",
        "upbeat electronic dance track with a pounding beat",
    ]
    candidates = tuple(ScoreCandidate(f"c{i}", c, None) for i, c in enumerate(captions))
    query = "A: The baby finally fell asleep. B: Shh, keep it quiet and calm."
    scores = asyncio.run(scorer.score(ScoreRequest(query, candidates, "caption", "d1", 0)))
    assert max(range(3), key=scores.__getitem__) == 1
    assert intact(mpnet_folder().parent)
