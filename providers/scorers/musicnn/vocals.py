"""Whether a clip has vocals, from the MagnaTagATune model's tags: the evidence for a voice
(its most probable vocal tag: vocal, singing, male/female voice, choir, opera, ...) against
the evidence for none (no vocals, no vocal, no voice). MTT annotators tagged "female" or
"man" for the singer, so those count as vocal tags too."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

VOCAL_TAGS = (
    "vocal",
    "vocals",
    "singing",
    "voice",
    "male vocal",
    "female vocal",
    "male voice",
    "female voice",
    "female",
    "male",
    "woman",
    "man",
    "choir",
    "choral",
    "opera",
)
VOICELESS_TAGS = ("no vocals", "no vocal", "no voice")
DEFAULT_THRESHOLD = 0.2


@dataclass(frozen=True)
class VocalEvidence:
    vocal_tag: str
    vocal: float  # probability of the most probable vocal tag
    voiceless: float  # probability of the most probable "no vocals" tag

    def has_vocals(self, threshold: float = DEFAULT_THRESHOLD) -> bool:
        """A voice is heard: its evidence reaches `threshold` and beats the evidence for none."""
        return self.vocal >= threshold and self.vocal > self.voiceless

    def describe(self) -> str:
        return f"{self.vocal_tag} {self.vocal:.3f} vs no vocals {self.voiceless:.3f}"


def vocal_evidence(scores: Mapping[str, float]) -> VocalEvidence:
    """The vocal evidence in an MTT model's tag probabilities."""
    missing = [t for t in (*VOCAL_TAGS, *VOICELESS_TAGS) if t not in scores]
    if missing:
        raise ValueError(f"not MagnaTagATune tags (missing {missing[:3]})")
    tag = max(VOCAL_TAGS, key=lambda t: scores[t])
    return VocalEvidence(tag, float(scores[tag]), max(float(scores[t]) for t in VOICELESS_TAGS))
