"""Audio Flamingo 3 and Music Flamingo as local judges
(`AudioFlamingo3ForConditionalGeneration`, `MusicFlamingoForConditionalGeneration`)."""

from __future__ import annotations

from providers.local._judge import LocalJudge


class AudioFlamingo3Judge(LocalJudge):
    default_model = "nvidia/audio-flamingo-3-hf"
    model_class = "AudioFlamingo3ForConditionalGeneration"
    processor_class = "AudioFlamingo3Processor"
    max_clips_per_prompt = 1


class MusicFlamingoJudge(AudioFlamingo3Judge):
    default_model = "nvidia/music-flamingo-2601-hf"
    model_class = "MusicFlamingoForConditionalGeneration"
    processor_class = "MusicFlamingoProcessor"
