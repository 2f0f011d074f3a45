"""Audio Flamingo 3 and Music Flamingo as local judges
(`AudioFlamingo3ForConditionalGeneration`, `MusicFlamingoForConditionalGeneration`).

Both take audio at 16 kHz through a Whisper feature extractor, cut into windows of the
extractor's `chunk_length` seconds (30 s in the real checkpoints, so a DialBGM clip is one
window); a clip becomes one `<sound>` id per encoder output frame over all its windows,
which Music Flamingo wraps in `<|sound_bos|>` ... `<|sound_eos|>`. The transformers
processors of both accept exactly one clip per prompt, and so do these judges.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from providers._local import EncodedAudio, Loaded, LocalJudge, conv_tokens, tensor_list


class AudioFlamingo3Judge(LocalJudge):
    default_model = "nvidia/audio-flamingo-3-hf"
    model_class = "AudioFlamingo3ForConditionalGeneration"
    max_clips_per_prompt = 1
    max_audio_s: float = 600.0  # as AudioFlamingo3Processor.max_audio_len

    def turns(self, system: str) -> tuple[str, str]:
        return (
            f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n",
            "<|im_end|>\n<|im_start|>assistant\n",
        )

    def wrap(self, config: Any, count: int) -> list[int]:
        return [config.audio_token_id] * count

    def encode_audio(self, loaded: Loaded, clips: list[NDArray[np.float32]]) -> EncodedAudio:
        extractor = loaded.extractor
        window = int(self.sampling_rate * extractor.chunk_length)
        max_windows = int(self.max_audio_s // extractor.chunk_length)
        chunks: list[NDArray[np.float32]] = []
        per_clip: list[int] = []
        for clip in clips:
            count = min(max(1, -(-len(clip) // window)), max_windows)
            per_clip.append(count)
            chunks += [clip[i * window : (i + 1) * window] for i in range(count)]
        features = extractor(
            chunks,
            sampling_rate=self.sampling_rate,
            return_attention_mask=True,
            return_tensors="pt",
        )
        mask = features["attention_mask"]
        frames = tensor_list(mask.sum(-1))
        placeholders, start = [], 0
        for count in per_clip:
            placeholders.append(
                self.wrap(loaded.model.config, conv_tokens(sum(frames[start : start + count])))
            )
            start += count
        return EncodedAudio(
            {"input_features": features["input_features"], "input_features_mask": mask},
            placeholders,
        )


class MusicFlamingoJudge(AudioFlamingo3Judge):
    default_model = "nvidia/music-flamingo-2601-hf"
    model_class = "MusicFlamingoForConditionalGeneration"
    max_audio_s = 1200.0  # as MusicFlamingoProcessor.max_audio_len

    def wrap(self, config: Any, count: int) -> list[int]:
        return [
            config.audio_bos_token_id,
            *[config.audio_token_id] * count,
            config.audio_eos_token_id,
        ]
