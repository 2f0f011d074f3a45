"""Prompt variants: which template, pointwise or joint, how answers are parsed.

Adding a variant is a template in `prompts/` plus one entry in `VARIANTS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from harness.audio import AudioRef, audio_ref
from harness.dataset import Clip, Item
from harness.parsing import ParsedAnswer, parse_pointwise
from harness.prompts import ClipView, RenderedPrompt, audio_placeholder, render

Mode = Literal["pointwise", "joint"]
Parser = Callable[[str, list[str]], ParsedAnswer]

POINTWISE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"score": {"type": "number", "minimum": 0, "maximum": 10}},
    "required": ["score"],
}


@dataclass(frozen=True)
class PromptContext:
    """Everything a variant needs to render the prompts of one item."""

    item: Item
    clips: dict[str, Clip]
    dialogue_mode: Literal["full", "summary"]
    music_mode: Literal["audio", "caption"]
    summary: str | None
    repeat: int = 0
    options: dict[str, Any] = field(default_factory=dict)

    def base(self) -> dict[str, Any]:
        return {
            "dialogue": [{"speaker": t.speaker, "text": t.text} for t in self.item.dialogue],
            "summary": self.summary,
            "dialogue_mode": self.dialogue_mode,
            "music_mode": self.music_mode,
            "options": self.options,
        }


@dataclass(frozen=True)
class PreparedCall:
    candidates: tuple[str, ...]  # the candidates this call covers, in presentation order
    prompt: RenderedPrompt


@dataclass(frozen=True)
class PromptVariant:
    name: str
    template: str
    mode: Mode = "pointwise"
    parse: Parser = parse_pointwise
    response_schema: dict[str, Any] | None = None
    sends_audio: bool = True

    def clip_views(
        self, ctx: PromptContext, order: list[str]
    ) -> tuple[list[ClipView], list[AudioRef]]:
        views, audio = [], []
        send_audio = self.sends_audio and ctx.music_mode == "audio"
        for index, cid in enumerate(order):
            clip = ctx.clips[cid]
            label = f"Clip {index + 1}" if len(order) > 1 else "Clip"
            if send_audio:
                audio.append(audio_ref(cid, clip.path))
            views.append(
                ClipView(label, clip.caption, audio_placeholder(index) if send_audio else "")
            )
        return views, audio

    def prepare(self, ctx: PromptContext) -> list[PreparedCall]:
        if self.mode == "pointwise":
            calls = []
            for cid in ctx.item.candidates:
                (view,), audio = self.clip_views(ctx, [cid])
                prompt = render(self.template, {**ctx.base(), "clip": view}, audio)
                calls.append(PreparedCall((cid,), prompt))
            return calls
        order = list(ctx.item.candidates)
        views, audio = self.clip_views(ctx, order)
        prompt = render(self.template, {**ctx.base(), "clips": views}, audio)
        return [PreparedCall(tuple(order), prompt)]


VARIANTS: dict[str, PromptVariant] = {
    "zero_shot": PromptVariant("zero_shot", "zero_shot.jinja", response_schema=POINTWISE_SCHEMA),
}


def get_variant(name: str) -> PromptVariant:
    try:
        return VARIANTS[name]
    except KeyError:
        raise ValueError(
            f"unknown prompt variant {name!r} (known: {', '.join(VARIANTS)})"
        ) from None
