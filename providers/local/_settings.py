"""What the local (transformers) providers share besides the judge loop: their `provider:`
keys, the settings derived from them, loading a checkpoint, freeing memory, and turning a
failed forward pass into a ProviderError. torch and transformers are imported only when a
model is loaded, so importing this module costs nothing to a user of the API providers."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field

from harness.core.errors import HarnessError
from harness.core.types import CALL, ProviderConfig, ProviderError

log = logging.getLogger(__name__)
DEFAULT_MAX_NEW_TOKENS = 64


class MissingLocalStack(HarnessError):
    pass


def require_local_stack() -> None:
    """Fail at construction, with the install hint, when torch or transformers is missing."""
    import importlib.util

    missing = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
    if missing:
        raise MissingLocalStack(
            f"local models need {' and '.join(missing)}: pip install 'bgm-judge[local]'"
        )


class LocalOptions(ProviderConfig):
    """The `provider:` keys every local provider takes (see README)."""

    dtype: str = Field(default="auto", description="auto = bfloat16 on a GPU, float32 on CPU")
    device: Annotated[str, CALL] = Field(
        default="auto", description="auto = cuda when available, else cpu"
    )
    device_map: Annotated[str | dict[str, Any] | None, CALL] = Field(
        default=None, description="accelerate device map; auto on a GPU"
    )
    batch_size: Annotated[int, CALL] = Field(default=8, ge=1)
    batch_wait_s: Annotated[float, CALL] = Field(default=0.005, ge=0.0)
    score: Literal["greedy", "expected"] = Field(
        default="greedy",
        description="expected: the probability-weighted score next to the greedy one",
    )
    expected_score: bool = Field(default=False, description="the same as score: expected")
    revision: str | None = Field(default=None, description="checkpoint revision (hub)")
    stop_after_json: bool = Field(
        default=False, description="end the answer where its first JSON object closes"
    )


@dataclass(frozen=True)
class LocalSettings:
    """A local provider's `LocalOptions` for one checkpoint, with the values they imply."""

    checkpoint: str
    dtype: str
    device: str
    device_map: str | dict[str, Any] | None
    batch_size: int
    batch_wait_s: float
    max_new_tokens: int
    expected_score: bool
    revision: str | None
    stop_after_json: bool

    @classmethod
    def from_options(cls, options: LocalOptions, checkpoint: str) -> LocalSettings:
        names = ("dtype", "device", "device_map", "batch_size", "batch_wait_s", "revision")
        return cls(
            checkpoint=checkpoint,
            **{name: getattr(options, name) for name in (*names, "stop_after_json")},
            max_new_tokens=options.max_tokens or DEFAULT_MAX_NEW_TOKENS,
            expected_score=options.expected_score or options.score == "expected",
        )

    def resolved_device(self) -> str:
        if self.device != "auto":
            return self.device
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"

    def resolved_dtype(self) -> str:
        if self.dtype != "auto":
            return self.dtype
        return "bfloat16" if self.resolved_device().startswith("cuda") else "float32"

    def load_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of every `from_pretrained` call of one checkpoint."""
        kwargs: dict[str, Any] = {}
        if Path(self.checkpoint).is_dir():
            kwargs["local_files_only"] = True
        elif self.revision:
            kwargs["revision"] = self.revision
        return kwargs

    def model_kwargs(self) -> dict[str, Any]:
        import torch

        kwargs = {**self.load_kwargs(), "dtype": getattr(torch, self.resolved_dtype())}
        device_map = self.device_map
        if device_map is None and self.resolved_device().startswith("cuda"):
            device_map = "auto"
        if device_map is not None:
            kwargs["device_map"] = device_map
        return kwargs


# How a prompt becomes tokens: "chat_template" = the checkpoint processor's own template
# (before: hand-written turn markers), so answers cached under the old format are not reused.
PROMPT_FORMAT = "chat_template"


def local_identity(
    base: dict[str, Any], settings: LocalSettings, *, generates: bool = True
) -> dict[str, Any]:
    """A local model's identity with the values it computes: the resolved dtype, and for a
    model that generates (a judge) its token limit, prompt format and `expected_score` (which
    `score: expected` also sets); a scorer keeps none of those, nor a temperature."""
    identity = {k: v for k, v in base.items() if k != "score"} | {
        "dtype": settings.resolved_dtype()
    }
    if settings.revision:
        identity["revision"] = settings.revision
    if not generates:
        return {k: v for k, v in identity.items() if k not in ("expected_score", "temperature")}
    return identity | {
        "max_new_tokens": settings.max_new_tokens,
        "expected_score": settings.expected_score,
        "prompt_format": PROMPT_FORMAT,
    }


def hf() -> Any:
    import transformers  # on first use (typed loosely: its classes are)

    return transformers


def load_model(model_class: str, settings: LocalSettings) -> Any:
    """`transformers.<model_class>.from_pretrained` on the settings' device and dtype. A
    checkpoint that lacks some of the class's weights is refused: transformers would fill them
    with random values and only log it, and the judge would score at random."""
    cls = getattr(hf(), model_class)
    model, info = cls.from_pretrained(
        settings.checkpoint, output_loading_info=True, **settings.model_kwargs()
    )
    refuse_missing_weights(settings.checkpoint, info.get("missing_keys", ()))
    if "device_map" not in settings.model_kwargs():
        model = model.to(settings.resolved_device())
    model.eval()
    return model


def refuse_missing_weights(source: str, missing: Iterable[str], what: str = "weights") -> None:
    """One line naming the parameters a checkpoint (or adapter) did not provide."""
    names = sorted(missing)
    if names:
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        raise ProviderError(
            f"{source}: {len(names)} {what} missing from the checkpoint (they would be random): "
            f"{shown}",
            transient=False,
            kind="load",
        )


def load_model_weights(model: Any, settings: LocalSettings) -> tuple[Any, Any]:
    """Put a plain torch module (not a transformers checkpoint) on the settings' device and
    dtype, in eval mode; returns (device, dtype)."""
    import torch

    device = torch.device(settings.resolved_device())
    dtype = getattr(torch, settings.resolved_dtype())
    model.to(device=device, dtype=dtype).eval()
    return device, dtype


def free_memory() -> None:
    import gc

    gc.collect()
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def as_provider_error(exc: Exception, what: str, kind: str = "local_model") -> ProviderError:
    """Map a failure inside a local forward pass (or, with kind="load", while loading: the
    run stops at the first) to a ProviderError the runner understands."""
    import torch

    if isinstance(exc, ProviderError):
        return exc
    if isinstance(exc, torch.OutOfMemoryError):
        return ProviderError(
            f"{what}: out of GPU memory; lower batch_size or use a smaller dtype",
            transient=False,
            kind="out_of_memory",
        )
    return ProviderError(f"{what}: {type(exc).__name__}: {exc}", transient=False, kind=kind)
