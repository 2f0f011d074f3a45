"""The TensorBundle reader and the weights locator, on bundles and wheels written here
(offline, no weights needed), plus checks of the real checkpoints where installed."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import re
import zipfile
from pathlib import Path

import numpy as np
import pytest

from harness.core.errors import HarnessError
from providers.scorers.musicnn import weights
from providers.scorers.musicnn.bundle import BundleFormatError, parse_index, read_tensors
from providers.scorers.musicnn.weights import (
    INSTALL_HINT,
    WHEEL_ENV,
    MusicnnWeightsError,
    load_checkpoint,
    locate,
    tag_names,
)
from tests.providers.scorers.musicnn._bundle_writer import write_bundle

INSTALLED = importlib.util.find_spec("musicnn") is not None
needs_weights = pytest.mark.skipif(
    not INSTALLED, reason=f"musicnn weights not installed ({INSTALL_HINT})"
)


def sample_tensors() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "conv2d/kernel": rng.normal(size=(7, 38, 1, 4)).astype(np.float32),
        "conv2d/bias": rng.normal(size=(4,)).astype(np.float32),
        "conv2d_1/kernel": rng.normal(size=(3, 2)).astype(np.float16),
        "global_step": np.array(123456789012, dtype=np.int64),
        "beta1_power": np.array(0.9, dtype=np.float32),
        "mask": np.array([True, False, True]),
        "bytes": np.arange(5, dtype=np.uint8),
    }


def test_round_trip_of_names_shapes_dtypes_and_values() -> None:
    tensors = sample_tensors()
    index, data = write_bundle(tensors, block_size=2)
    read = read_tensors(index, [data])
    assert sorted(read) == sorted(tensors)
    for name, expected in tensors.items():
        assert read[name].dtype == expected.dtype, name
        assert read[name].shape == expected.shape, name
        np.testing.assert_array_equal(read[name], expected)
    assert read["conv2d/kernel"].flags.writeable


def test_prefix_compressed_keys_across_blocks() -> None:
    # Long shared prefixes and one entry per data block exercise key reconstruction.
    tensors = {f"batch_normalization_{i}/moving_mean": np.full(2, i, np.float32) for i in range(12)}
    for block_size in (1, 5, 100):
        index, data = write_bundle(tensors, block_size=block_size)
        read = read_tensors(index, [data])
        assert {k: float(v[0]) for k, v in read.items()} == {
            k: float(v[0]) for k, v in tensors.items()
        }


def test_index_entries_point_into_the_data() -> None:
    index, data = write_bundle(sample_tensors())
    bundle = parse_index(index)
    assert bundle.num_shards == 1
    entry = bundle.entries["conv2d/kernel"]
    assert entry.shape == (7, 38, 1, 4) and entry.dtype == 1 and entry.size == 7 * 38 * 4 * 4
    assert bundle.entries["global_step"].shape == ()
    assert all(e.offset + e.size <= len(data) for e in bundle.entries.values())
    assert sum(e.size for e in bundle.entries.values()) == len(data)


def test_not_a_bundle() -> None:
    index, data = write_bundle(sample_tensors())
    with pytest.raises(BundleFormatError, match="magic"):
        read_tensors(index[:-1] + b"\x00", [data])
    with pytest.raises(BundleFormatError, match="too short"):
        read_tensors(b"short", [data])


def test_truncated_data_shard() -> None:
    index, data = write_bundle(sample_tensors())
    with pytest.raises(BundleFormatError, match="truncated"):
        read_tensors(index, [data[: len(data) // 2]])
    with pytest.raises(BundleFormatError, match="shards"):
        read_tensors(index, [data, data])


# ------------------------------------------------------------------ weights locator
CONFIGURATION = "SR = 16000\nMTT_LABELS = ['guitar', 'no vocals']\nMSD_LABELS = ['rock']\n"


def record_digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def fake_wheel(path: Path, tamper: bool = False) -> Path:
    """A wheel-shaped zip holding one tiny MTT_musicnn checkpoint and a RECORD."""
    index, data = write_bundle({"dense/bias": np.arange(2, dtype=np.float32)})
    members = {
        "musicnn/MTT_musicnn/.index": index,
        "musicnn/MTT_musicnn/.data-00000-of-00001": data,
        "musicnn/configuration.py": CONFIGURATION.encode(),
    }
    record = "".join(
        f"{name},{record_digest(content)},{len(content)}\n" for name, content in members.items()
    )
    if tamper:
        members["musicnn/MTT_musicnn/.data-00000-of-00001"] = data[:-4] + b"\x00\x00\x80\x7f"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, content in members.items():
            wheel.writestr(name, content)
        wheel.writestr(f"musicnn-{weights.VERSION}.dist-info/RECORD", record)
    return path


def test_reads_a_wheel_given_as_argument_or_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = fake_wheel(tmp_path / "musicnn-0.1.0-py3-none-any.whl")
    source = locate(wheel)
    assert source.is_wheel and source.location == wheel
    np.testing.assert_array_equal(load_checkpoint("MTT_musicnn", source)["dense/bias"], [0, 1])
    assert tag_names("MTT_musicnn", source) == ("guitar", "no vocals")
    assert tag_names("MSD_vgg", source) == ("rock",)
    monkeypatch.setenv(WHEEL_ENV, str(wheel))
    assert locate() == source


def test_a_changed_checkpoint_file_is_refused(tmp_path: Path) -> None:
    source = locate(fake_wheel(tmp_path / "w.whl", tamper=True))
    with pytest.raises(MusicnnWeightsError, match="does not match the published"):
        load_checkpoint("MTT_musicnn", source)
    assert load_checkpoint("MTT_musicnn", source, verify=False)["dense/bias"][1] == np.inf


def test_missing_weights_name_the_install_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(HarnessError, match=re.escape("pip download --no-deps musicnn==0.1.0")):
        locate(tmp_path / "absent.whl")
    monkeypatch.delenv(WHEEL_ENV, raising=False)
    monkeypatch.setattr(weights.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(MusicnnWeightsError) as caught:
        locate()
    message = str(caught.value)
    assert "pip install --no-deps musicnn==0.1.0" in message and "\n" not in message


def test_a_model_missing_from_the_wheel(tmp_path: Path) -> None:
    source = locate(fake_wheel(tmp_path / "w.whl"))
    with pytest.raises(MusicnnWeightsError, match=r"MSD_musicnn/\.index"):
        load_checkpoint("MSD_musicnn", source)
    with pytest.raises(MusicnnWeightsError, match="unknown musicnn model"):
        load_checkpoint("MSD_musicnn_big", source)  # type: ignore[arg-type]


# ------------------------------------------------------------------ the real checkpoints
@needs_weights
@pytest.mark.parametrize("model", weights.MODELS)
def test_real_checkpoint_layout(model: weights.ModelName) -> None:
    tensors = load_checkpoint(model, locate())
    assert all(t.dtype == np.float32 for t in tensors.values())
    if model.endswith("musicnn"):
        assert len(tensors) == 150  # 66 model variables, their Adam slots, 2 Adam powers
        assert tensors["conv2d/kernel"].shape == (7, 38, 1, 204)
        assert tensors["conv2d_1/kernel"].shape == (7, 67, 1, 204)
        assert tensors["conv2d_5/kernel"].shape == (7, 561, 1, 64)
        assert tensors["batch_normalization_9/gamma"].shape == (1506,)
        assert tensors["dense_1/kernel"].shape == (200, 50)
    else:
        assert tensors["1CNN/kernel"].shape == (3, 3, 1, 128)
        assert tensors["dense/kernel"].shape == (256, 50)


@needs_weights
def test_real_tag_lists() -> None:
    source = locate()
    mtt, msd = tag_names("MTT_musicnn", source), tag_names("MSD_musicnn", source)
    assert len(mtt) == len(set(mtt)) == 50 and len(msd) == len(set(msd)) == 50
    assert mtt[:3] == ("guitar", "classical", "slow") and mtt[-1] == "choral"
    assert {"no vocals", "male vocal", "new age"} <= set(mtt)
    assert msd[:3] == ("rock", "pop", "alternative") and msd[-1] == "happy"
    assert {"Hip-Hop", "female vocalists", "00s"} <= set(msd)
    assert tag_names("MTT_vgg", source) == mtt and tag_names("MSD_vgg", source) == msd
