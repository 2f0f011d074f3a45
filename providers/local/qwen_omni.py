"""Qwen2.5-Omni as a local judge: the Thinker only (text out; the talker is never loaded).

`Qwen2_5OmniThinkerForConditionalGeneration.from_pretrained` on the full checkpoint
(`Qwen/Qwen2.5-Omni-7B`) reads the thinker's sub-config and weights. Prompts go through the
checkpoint's `Qwen2_5OmniProcessor`: its chat template writes each clip as
`<|audio_bos|><|AUDIO|><|audio_eos|>` and the processor expands `<|AUDIO|>` to one token per
audio-encoder frame of the clip (16 kHz, the checkpoint's Whisper feature extractor).
"""

from __future__ import annotations

from providers.local._judge import LocalJudge


class QwenOmniJudge(LocalJudge):
    default_model = "Qwen/Qwen2.5-Omni-7B"
    model_class = "Qwen2_5OmniThinkerForConditionalGeneration"
    processor_class = "Qwen2_5OmniProcessor"
