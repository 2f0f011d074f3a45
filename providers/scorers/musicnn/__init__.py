"""The pretrained musicnn music taggers (Pons & Serra, 2019) ported to PyTorch: the
MagnaTagATune and Million Song Dataset models, musicnn and VGG-like, 50 tags each."""

from providers.scorers.musicnn.tagger import Tagger, describe
from providers.scorers.musicnn.vocals import vocal_evidence
from providers.scorers.musicnn.weights import (
    INSTALL_HINT,
    MODELS,
    WHEEL_ENV,
    ModelName,
    MusicnnWeightsError,
    locate,
)

__all__ = [
    "INSTALL_HINT",
    "MODELS",
    "WHEEL_ENV",
    "ModelName",
    "MusicnnWeightsError",
    "Tagger",
    "describe",
    "locate",
    "vocal_evidence",
]
