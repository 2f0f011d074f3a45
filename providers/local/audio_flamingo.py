"""Audio Flamingo 3 and Music Flamingo as local judges
(`AudioFlamingo3ForConditionalGeneration`, `MusicFlamingoForConditionalGeneration`).

Prompts go through the checkpoints' own processors (`AudioFlamingo3Processor`,
`MusicFlamingoProcessor`). Their chat templates put the clip's `<sound>` first in the user turn
and the turn's text after it, whatever the order of the parts; the processor cuts a clip into
windows of the feature extractor's `chunk_length` (30 s in the real checkpoints, so a DialBGM
clip is one window) and expands `<sound>` to one token per encoder output frame over all its
windows, which Music Flamingo wraps in `<|sound_bos|>` ... `<|sound_eos|>`. Both processors
take one clip per prompt, and so do these judges.
"""

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
