"""PyTorch versions of the musicnn and VGG-like taggers of `musicnn/models.py` (0.1.0), in
inference mode, and the mapping of their TensorFlow variables onto them."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
import torch.nn.functional as F
from numpy.typing import NDArray
from torch import nn

from providers.scorers.musicnn.features import N_MELS

BN_EPS = 1e-3
TEMPORAL_KERNELS = (128, 64, 32)


def _bn(channels: int, dims: int) -> nn.Module:
    return (nn.BatchNorm1d if dims == 1 else nn.BatchNorm2d)(channels, eps=BN_EPS)


def _pad_time(x: torch.Tensor, before: int, after: int) -> torch.Tensor:
    """Zero-pad the time axis of (B, C, T, F) or (B, C, T)."""
    return F.pad(x, (0, 0, before, after) if x.dim() == 4 else (before, after))


class MusiCNN(nn.Module):
    """Front-end of timbral (7 x 38, 7 x 67) and temporal (128/64/32 x 1) filters, a
    densely connected 1-D mid-end, and max+mean pooled dense back-end."""

    def __init__(self, num_classes: int = 50, midend: int = 64, backend: int = 200) -> None:
        super().__init__()
        timbral, temporal = 204, 51  # int(1.6 * 128), int(1.6 * 32)
        self.input_bn = _bn(1, 2)
        self.timbral = nn.ModuleList(
            nn.Conv2d(1, timbral, (7, int(fraction * N_MELS))) for fraction in (0.4, 0.7)
        )
        self.temporal = nn.ModuleList(nn.Conv2d(1, temporal, (k, 1)) for k in TEMPORAL_KERNELS)
        self.front_bn = nn.ModuleList(_bn(c, 2) for c in (timbral,) * 2 + (temporal,) * 3)
        front = 2 * timbral + 3 * temporal
        self.mid = nn.ModuleList(nn.Conv1d(c, midend, 7) for c in (front, midend, midend))
        self.mid_bn = nn.ModuleList(_bn(midend, 1) for _ in range(3))
        self.pool_bn = _bn(2 * (front + 3 * midend), 1)
        self.dense = nn.Linear(2 * (front + 3 * midend), backend)
        self.dense_bn = _bn(backend, 1)
        self.out = nn.Linear(backend, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, 187, 96) log-mel windows -> (B, classes) logits."""
        x = self.input_bn(x.unsqueeze(1))
        padded = _pad_time(x, 3, 3)
        # TensorFlow's "same" padding: the odd pad of an even kernel goes after.
        inputs = [padded, padded] + [_pad_time(x, (k - 1) // 2, k // 2) for k in TEMPORAL_KERNELS]
        convs = [*self.timbral, *self.temporal]
        maps = zip(convs, self.front_bn, inputs, strict=True)
        front = torch.cat([bn(F.relu(conv(inp))).amax(dim=3) for conv, bn, inp in maps], 1)
        features = [front]
        h = front
        for i, (conv, bn) in enumerate(zip(self.mid, self.mid_bn, strict=True)):
            out = bn(F.relu(conv(_pad_time(h, 3, 3))))
            h = out if i == 0 else out + h
            features.append(h)
        stacked = torch.cat(features, 1)  # (B, 753, T)
        # channels-last flatten of (B, 753, [max, mean]): max and mean interleave.
        pooled = torch.stack([stacked.amax(dim=2), stacked.mean(dim=2)], dim=2).flatten(1)
        hidden = self.dense_bn(F.relu(self.dense(self.pool_bn(pooled))))
        logits: torch.Tensor = self.out(hidden)
        return logits

    def load_tf(self, tensors: Tensors) -> None:
        convs = [*self.timbral, *self.temporal]
        for k, conv in enumerate(convs):
            _load_conv2d(conv, tensors, _name("conv2d", k))
        for k, conv1d in enumerate(self.mid, start=len(convs)):
            _load_conv1d(conv1d, tensors, _name("conv2d", k))
        bns = [self.input_bn, *self.front_bn, *self.mid_bn, self.pool_bn, self.dense_bn]
        for k, bn in enumerate(bns):
            _load_bn(bn, tensors, _name("batch_normalization", k))
        _load_dense(self.dense, tensors, "dense")
        _load_dense(self.out, tensors, "dense_1")


class VGG(nn.Module):
    """Five 3 x 3 conv / batch-norm / max-pool blocks and one dense layer."""

    pools = ((4, 1), (2, 2), (2, 2), (2, 2), (4, 4))
    strides = ((2, 2), (2, 2), (2, 2), (2, 2), (4, 4))

    def __init__(self, num_classes: int = 50, filters: int = 128) -> None:
        super().__init__()
        self.input_bn = _bn(1, 2)
        self.convs = nn.ModuleList(
            nn.Conv2d(1 if i == 0 else filters, filters, 3, padding=1) for i in range(5)
        )
        self.bns = nn.ModuleList(_bn(filters, 2) for _ in range(5))
        self.out = nn.Linear(2 * 1 * filters, num_classes)  # 187 x 96 pools down to 2 x 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.input_bn(x.unsqueeze(1))
        for conv, bn, pool, stride in zip(
            self.convs, self.bns, self.pools, self.strides, strict=True
        ):
            h = F.max_pool2d(bn(F.relu(conv(h))), pool, stride)
        logits: torch.Tensor = self.out(h.permute(0, 2, 3, 1).flatten(1))  # channels-last
        return logits

    def load_tf(self, tensors: Tensors) -> None:
        for k, conv in enumerate(self.convs):
            _load_conv2d(conv, tensors, f"{k + 1}CNN")
        for k, bn in enumerate([self.input_bn, *self.bns]):
            _load_bn(bn, tensors, _name("batch_normalization", k))
        _load_dense(self.out, tensors, "dense")


def build(model: str, num_classes: int) -> MusiCNN | VGG:
    """An untrained network of the architecture named by a musicnn model name."""
    if model.endswith("_musicnn"):
        return MusiCNN(num_classes)
    if model.endswith("_vgg"):
        return VGG(num_classes)
    raise ValueError(f"unknown musicnn architecture: {model}")


# ------------------------------------------------------------------ TF -> torch
def _name(kind: str, k: int) -> str:
    return kind if k == 0 else f"{kind}_{k}"


Tensors = Mapping[str, NDArray[np.generic]]


def _copy(param: torch.Tensor, tensors: Tensors, name: str, layout: str = "") -> None:
    """Copy variable `name` into `param`, its axes reordered as `layout` says."""
    if name not in tensors:
        raise KeyError(f"checkpoint has no variable {name!r}")
    value = np.asarray(tensors[name], dtype=np.float32)
    tensor = torch.from_numpy(np.ascontiguousarray(np.einsum(layout, value) if layout else value))
    if tensor.shape != param.shape:
        raise ValueError(f"{name}: shape {tuple(tensor.shape)} != {tuple(param.shape)}")
    with torch.no_grad():
        param.copy_(tensor)


def _load_conv2d(conv: nn.Module, tensors: Tensors, scope: str) -> None:
    assert isinstance(conv, nn.Conv2d) and conv.bias is not None
    _copy(conv.weight, tensors, f"{scope}/kernel", "hwio->oihw")
    _copy(conv.bias, tensors, f"{scope}/bias")


def _load_conv1d(conv: nn.Module, tensors: Tensors, scope: str) -> None:
    assert isinstance(conv, nn.Conv1d) and conv.bias is not None
    # A (7, C) kernel sliding over (time, C) with one input channel is a 1-D convolution
    # over time with C input channels.
    _copy(conv.weight, tensors, f"{scope}/kernel", "tcxo->oct")
    _copy(conv.bias, tensors, f"{scope}/bias")


def _load_bn(bn: nn.Module, tensors: Tensors, scope: str) -> None:
    assert isinstance(bn, nn.BatchNorm1d | nn.BatchNorm2d)
    assert bn.running_mean is not None and bn.running_var is not None
    params = (bn.weight, bn.bias, bn.running_mean, bn.running_var)
    for param, name in zip(
        params, ("gamma", "beta", "moving_mean", "moving_variance"), strict=True
    ):
        _copy(param, tensors, f"{scope}/{name}")


def _load_dense(dense: nn.Linear, tensors: Tensors, scope: str) -> None:
    _copy(dense.weight, tensors, f"{scope}/kernel", "io->oi")
    _copy(dense.bias, tensors, f"{scope}/bias")
