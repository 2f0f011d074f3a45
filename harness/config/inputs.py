"""What a model is given (`inputs:`), and what an entry of a sweep's `providers:` pins of
its runs (its own `inputs:` and `prompts:`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, model_validator


class Inputs(BaseModel):
    """What a model is given: the query side and the candidates (audio or caption/title)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    dialogue: Literal["full", "summary", "query", "none"] = "full"
    music: Literal["audio", "caption"] = "audio"
    context_audio: bool = False

    @model_validator(mode="after")
    def _something_to_go_on(self) -> Inputs:
        if self.dialogue == "none" and not self.context_audio:
            raise ValueError("dialogue: none needs context_audio: true (nothing on the query side)")
        return self

    @property
    def label(self) -> str:
        """How run names and reports show the inputs (`query_caption_context-audio`)."""
        parts = [self.dialogue, self.music] + (["context-audio"] if self.context_audio else [])
        return "_".join(parts)


@dataclass(frozen=True)
class Pin:
    """What one entry of a sweep's `providers:` pins for its own runs."""

    inputs: Inputs | None = None
    prompts: tuple[str, ...] | None = None
