"""Phi-4-multimodal as a local judge (`Phi4MultimodalForCausalLM`), with transformers' native
classes only: no remote code is ever run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from harness.core.types import ProviderConfig
from providers.local._judge import Loaded, LocalJudge
from providers.local._settings import LocalOptions, refuse_missing_weights

DEFAULT_LORA = "speech-lora"
# The revision transformers' integration tests load (tests/models/phi4_multimodal/
# test_modeling_phi4_multimodal.py); the hub's main branch is the remote-code format.
NATIVE_REVISION = "refs/pr/70"


class Phi4Options(LocalOptions):
    lora: str | None = Field(
        default=DEFAULT_LORA, description="the checkpoint's LoRA subfolder; null: base weights"
    )
    revision: str | None = Field(
        default=NATIVE_REVISION,
        description="hub revision; the default is the converted (native) checkpoint",
    )


class Phi4MultimodalJudge(LocalJudge):
    default_model = "microsoft/Phi-4-multimodal-instruct"
    model_class = "Phi4MultimodalForCausalLM"
    processor_class = "Phi4MultimodalProcessor"
    Options = Phi4Options
    config: Phi4Options

    def __init__(self, config: ProviderConfig) -> None:
        super().__init__(config)
        self.lora = self.config.lora

    def identity(self) -> dict[str, Any]:
        return super().identity() | {"lora": self.lora}

    def load(self) -> Loaded:
        first = self._loaded is None
        loaded = super().load()
        if first and self.lora and self._has_lora():
            loaded.model = self._with_adapter(loaded.model)
        return loaded

    def _with_adapter(self, model: Any) -> Any:
        """The model wrapped with the speech LoRA through peft itself (transformers'
        `load_adapter` integration wants a newer peft than its range admits, and reports
        missing adapter weights only in a log); an adapter file lacking some of the LoRA's
        weights is refused."""
        from peft import PeftConfig, PeftModel

        kwargs = {"subfolder": self.lora, **self.settings.load_kwargs()}
        config = PeftConfig.from_pretrained(self.settings.checkpoint, **kwargs)
        config.inference_mode = True
        wrapped = PeftModel(model, config, adapter_name="speech")
        result = wrapped.load_adapter(self.settings.checkpoint, "speech", **kwargs)
        refuse_missing_weights(
            f"{self.settings.checkpoint}/{self.lora}", result.missing_keys, "adapter weights"
        )
        wrapped.set_adapter("speech")
        return wrapped.eval()

    def _has_lora(self) -> bool:
        """A local checkpoint must hold the subfolder (a tiny test model has none); a hub id
        is assumed to, and fails loudly at load time if it does not."""
        local = Path(self.settings.checkpoint)
        return not local.is_dir() or (local / str(self.lora)).is_dir()
