"""Qwen2.5-Omni as a local judge: the Thinker only (text out; the talker is never loaded).

`Qwen2_5OmniThinkerForConditionalGeneration.from_pretrained` on the full checkpoint
(`Qwen/Qwen2.5-Omni-7B`) reads the thinker's sub-config and weights. Audio goes in at
16 kHz through the checkpoint's Whisper feature extractor; each clip becomes
`<|audio_bos|>`, one `<|AUDIO|>` per encoder output frame, `<|audio_eos|>`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from providers._local import EncodedAudio, Loaded, LocalJudge, conv_tokens, tensor_list


class QwenOmniJudge(LocalJudge):
    default_model = "Qwen/Qwen2.5-Omni-7B"
    model_class = "Qwen2_5OmniThinkerForConditionalGeneration"

    def turns(self, system: str) -> tuple[str, str]:
        return (
            f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n",
            "<|im_end|>\n<|im_start|>assistant\n",
        )

    def encode_audio(self, loaded: Loaded, clips: list[NDArray[np.float32]]) -> EncodedAudio:
        features = loaded.extractor(
            clips,
            sampling_rate=self.sampling_rate,
            padding="max_length",
            return_attention_mask=True,
            return_tensors="pt",
        )
        mask = features["attention_mask"]
        config: Any = loaded.model.config
        audio, bos, eos = (
            config.audio_token_id,
            config.audio_start_token_id,
            config.audio_end_token_id,
        )
        placeholders = [
            [bos] + [audio] * conv_tokens(frames) + [eos] for frames in tensor_list(mask.sum(-1))
        ]
        return EncodedAudio(
            {"input_features": features["input_features"], "feature_attention_mask": mask},
            placeholders,
        )
