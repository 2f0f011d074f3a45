"""The pretrained musicnn music taggers (Pons & Serra, 2019) ported to PyTorch: the
MagnaTagATune and Million Song Dataset models, musicnn and VGG-like, 50 tags each."""

from providers.scorers.musicnn.tagger import Clip, Tagger, describe, top_tags
from providers.scorers.musicnn.vocals import (
    VOCAL_TAGS,
    VOICELESS_TAGS,
    VocalEvidence,
    vocal_evidence,
)
from providers.scorers.musicnn.weights import (
    INSTALL_HINT,
    MODELS,
    WHEEL_ENV,
    ModelName,
    MusicnnWeightsError,
    locate,
    tag_names,
)

__all__ = [
    "INSTALL_HINT",
    "MODELS",
    "VOCAL_TAGS",
    "VOICELESS_TAGS",
    "WHEEL_ENV",
    "Clip",
    "ModelName",
    "MusicnnWeightsError",
    "Tagger",
    "VocalEvidence",
    "describe",
    "locate",
    "tag_names",
    "top_tags",
    "vocal_evidence",
]
