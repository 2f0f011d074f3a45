"""Qwen2.5-Omni as a local judge: the Thinker only (text out; the talker is never loaded)."""

from __future__ import annotations

from providers.local._judge import LocalJudge


class QwenOmniJudge(LocalJudge):
    default_model = "Qwen/Qwen2.5-Omni-7B"
    model_class = "Qwen2_5OmniThinkerForConditionalGeneration"
    processor_class = "Qwen2_5OmniProcessor"
