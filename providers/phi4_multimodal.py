"""Phi-4-multimodal as a local judge (`Phi4MultimodalForCausalLM`).

Audio goes in at 16 kHz through `Phi4MultimodalFeatureExtractor`; each clip becomes as many
`<|audio|>` ids as the extractor's `audio_embed_sizes` says. The checkpoint keeps its speech
LoRA in the `speech-lora` subfolder: it is loaded and activated with peft (`lora:` in the
provider block names another subfolder; `lora: null` runs the base weights).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from pydantic import Field

from harness.types import ProviderConfig
from providers._local import EncodedAudio, Loaded, LocalJudge, tensor_list
from providers._local_settings import LocalOptions

DEFAULT_LORA = "speech-lora"


class Phi4Options(LocalOptions):
    lora: str | None = Field(
        default=DEFAULT_LORA, description="the checkpoint's LoRA subfolder; null: base weights"
    )


class Phi4MultimodalJudge(LocalJudge):
    default_model = "microsoft/Phi-4-multimodal-instruct"
    model_class = "Phi4MultimodalForCausalLM"
    Options = Phi4Options
    config: Phi4Options

    def __init__(self, config: ProviderConfig) -> None:
        super().__init__(config)
        self.lora = self.config.lora

    def identity(self) -> dict[str, Any]:
        return {**super().identity(), "lora": self.lora}

    def turns(self, system: str) -> tuple[str, str]:
        return f"<|system|>{system}<|end|><|user|>", "<|end|><|assistant|>"

    def load(self) -> Loaded:
        first = self._loaded is None
        loaded = super().load()
        if first and self.lora and self._has_lora():
            loaded.model.load_adapter(
                self.settings.checkpoint,
                adapter_name="speech",
                adapter_kwargs={"subfolder": self.lora, **self.settings.load_kwargs()},
            )
            loaded.model.set_adapter("speech")
        return loaded

    def _has_lora(self) -> bool:
        """A local checkpoint must hold the subfolder (a tiny test model has none); a hub id
        is assumed to, and fails loudly at load time if it does not."""
        local = Path(self.settings.checkpoint)
        return not local.is_dir() or (local / str(self.lora)).is_dir()

    def encode_audio(self, loaded: Loaded, clips: list[NDArray[np.float32]]) -> EncodedAudio:
        features = loaded.extractor(clips, sampling_rate=self.sampling_rate, return_tensors="pt")
        token: int = loaded.model.config.audio_config.audio_token_id
        sizes = tensor_list(features["audio_embed_sizes"])
        inputs = {
            "audio_input_features": features["audio_input_features"],
            "audio_embed_sizes": features["audio_embed_sizes"],
        }
        if "audio_attention_mask" in features:
            inputs["audio_attention_mask"] = features["audio_attention_mask"]
        return EncodedAudio(inputs, [[token] * size for size in sizes])
