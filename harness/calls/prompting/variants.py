"""Prompt variants: template, mode, parser and `prompt_options` (docs/prompts.md). A variant is a
template plus one entry in `VARIANTS`, or an entry point `bgm_judge.prompts` naming a
`PromptVariant` whose templates are in its `folder`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from harness.calls.prompting.fewshot import Example, FewShotOptions, few_shot_options
from harness.calls.prompting.joint import (
    SCORE,
    JointOptions,
    clip_labels,
    joint_options,
    joint_schema,
    presentation_order,
)
from harness.calls.prompting.parsing import (
    RATINGS,
    ParsedAnswer,
    parse_cot,
    parse_description,
    parse_joint,
    parse_pointwise,
    parse_ranked_prefix,
    parse_ratings,
    parse_rubric,
)
from harness.calls.prompting.templates import (
    ClipView,
    RenderedPrompt,
    add_template_folder,
    audio_placeholder,
    render,
    render_each,
)
from harness.core.audio import audio_ref
from harness.core.dataset import Clip, Item
from harness.core.errors import HarnessError
from harness.core.plugins import Registry, named
from harness.core.types import AudioRef

# pointwise: one call per candidate; joint: one call per item naming every candidate;
# describe: one call per item that names no candidate (a retriever ranks them afterwards).
Mode = Literal["pointwise", "joint", "describe"]
Parser = Callable[[str, list[str]], ParsedAnswer]


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties)}


POINTWISE_SCHEMA = _object({"score": SCORE})
DESCRIPTION_SCHEMA = _object({"description": {"type": "string"}})
RATINGS_SCHEMA = _object(
    {name: {"type": "integer", "minimum": 1, "maximum": 5} for name in RATINGS}
)
RUBRIC_SCHEMA = _object({"A": SCORE, "B": SCORE, "C": SCORE, "vocals": {"type": "boolean"}})


def check_options(options: Mapping[str, Any]) -> None:
    """Refuse a `prompt_options` key no variant takes (a sweep's variants share options)."""
    if not options:
        return  # checked for every item: the registry is not walked when nothing is given
    known = {name for v in VARIANTS.values() if v.options for name in v.options.model_fields}
    unknown = sorted(set(options) - known)
    if unknown:
        raise HarnessError(f"unknown prompt_options {unknown} (known: {', '.join(sorted(known))})")


@dataclass(frozen=True)
class ExampleClipView(ClipView):
    score: str


@dataclass(frozen=True)
class ExampleView:
    dialogue: list[dict[str, str]]
    summary: str | None
    music_mode: str
    clips: list[ExampleClipView]


DialogueMode = Literal["full", "summary", "query", "none"]


@dataclass(frozen=True)
class PromptContext:
    item: Item
    clips: dict[str, Clip]
    dialogue_mode: DialogueMode
    music_mode: Literal["audio", "caption"]
    summary: str | None
    repeat: int = 0
    options: dict[str, Any] = field(default_factory=dict)
    examples: tuple[Example, ...] = ()  # few-shot examples, with their summaries filled in
    seed: int = 0  # seeds the permuted presentation order of joint prompts
    context_audio: tuple[AudioRef, ...] = ()  # the item's own audio, excerpted to the budget
    # The second turn of `protocol: refine`: the model's first pick and the user's reply.
    first_pick: str | None = None
    feedback: str | None = None

    def base(self) -> dict[str, Any]:
        context = "".join(audio_placeholder(i) for i in range(len(self.context_audio)))
        return {
            "dialogue": [{"speaker": t.speaker, "text": t.text} for t in self.item.dialogue],
            "summary": self.summary,
            "query": self.item.query,
            "context_audio": context,
            "dialogue_mode": self.dialogue_mode,
            "music_mode": self.music_mode,
            "options": self.options,
            "item": self.item.model_extra,  # the item's own fields (music-crs: the response)
        }


@dataclass(frozen=True)
class PreparedCall:
    candidates: tuple[str, ...]  # the candidates this call covers, in presentation order
    prompt: RenderedPrompt
    schema: dict[str, Any] | None = None  # JSON schema of the answer, for JSON mode


@dataclass(frozen=True)
class PromptVariant:
    name: str
    template: str
    mode: Mode = "pointwise"
    parse: Parser = parse_pointwise
    response_schema: dict[str, Any] | None = None  # None: no JSON mode (or built per call)
    sends_audio: bool = True
    uses_examples: bool = False
    options: type[BaseModel] | None = None  # the `prompt_options` it takes
    answer_tokens: int = 8  # a typical answer's length in tokens (dry-run estimates)
    folder: Path | None = None  # a plugin's own templates (after the prompts folder)

    def output_tokens(self, n_candidates: int) -> int:
        if self.mode == "joint":
            return self.answer_tokens + 8 * n_candidates
        return self.answer_tokens

    # The query side it can show: DialBGM's templates show a conversation (or its summary);
    # `listwise` also shows a text query, the item's own audio, or the audio alone.
    dialogue_modes: frozenset[str] = frozenset({"full", "summary"})
    shows_context_audio: bool = False
    ranks_only: bool = False  # always asks for a ranked prefix (listwise)
    second_turn: str | None = None  # the template of a refine run's second turn

    def check_protocol(self, protocol: str) -> None:
        if protocol == "refine" and self.second_turn is None:
            raise HarnessError(
                f"protocol: refine asks a judge to rank the pool twice; prompt {self.name} "
                "has no second turn: use prompt listwise"
            )

    def check_inputs(self, dialogue: str, context_audio: bool) -> None:
        if dialogue not in self.dialogue_modes:
            raise HarnessError(
                f"prompt {self.name} shows a conversation (inputs.dialogue: full or summary), "
                f"not inputs.dialogue: {dialogue}; use prompt listwise"
            )
        if context_audio and not self.shows_context_audio:
            raise HarnessError(
                f"prompt {self.name} does not play an item's context audio; use prompt listwise"
            )

    def parser(self, options: Mapping[str, Any]) -> Parser:
        if self.mode == "joint" and not self.ranks_only and joint_options(options).partial:
            return parse_ranked_prefix
        return self.parse

    def clip_views(
        self, ctx: PromptContext, order: list[str], first_audio: int = 0
    ) -> tuple[list[ClipView], list[AudioRef]]:
        views, audio = [], []
        send_audio = self.sends_audio and ctx.music_mode == "audio"
        for index, (cid, label) in enumerate(zip(order, clip_labels(len(order)), strict=True)):
            clip = ctx.clips[cid]
            if send_audio:
                audio.append(audio_ref(cid, clip.path))
            placeholder = audio_placeholder(first_audio + index) if send_audio else ""
            views.append(ClipView(label, clip.text, placeholder))
        return views, audio

    def example_views(
        self, ctx: PromptContext, first_audio: int
    ) -> tuple[list[ExampleView], list[AudioRef]]:
        if not self.uses_examples:
            return [], []
        send_audio = (
            self.sends_audio
            and ctx.music_mode == "audio"
            and few_shot_options(ctx.options).example_audio
        )
        views: list[ExampleView] = []
        audio: list[AudioRef] = []
        for example in ctx.examples:
            clips = []
            labels = clip_labels(len(example.clips))
            for clip, label, score in zip(example.clips, labels, example.scores, strict=True):
                placeholder = ""
                if send_audio:
                    placeholder = audio_placeholder(first_audio + len(audio))
                    audio.append(audio_ref(clip.id, clip.path))
                clips.append(ExampleClipView(label, clip.caption, placeholder, f"{score:.1f}"))
            turns = [{"speaker": t.speaker, "text": t.text} for t in example.item.dialogue]
            mode = "audio" if send_audio else "caption"
            views.append(ExampleView(turns, example.summary, mode, clips))
        return views, audio

    def prepare(self, ctx: PromptContext) -> list[PreparedCall]:
        check_options(ctx.options)
        self.check_inputs(ctx.dialogue_mode, bool(ctx.context_audio))
        if self.mode == "describe":  # the candidates are not shown, whatever inputs.music
            context = {**ctx.base(), "mode": self.mode}
            prompt = render(self.template, context, list(ctx.context_audio))
            return [PreparedCall(ctx.item.candidates, prompt, self.response_schema)]
        if not self.sends_audio and ctx.music_mode == "audio":
            raise HarnessError(
                f"prompt {self.name} describes the music in words and sends no audio: "
                "set inputs.music: caption"
            )
        if self.mode == "pointwise":
            each = [self.clip_views(ctx, [cid]) for cid in ctx.item.candidates]
            # Every candidate sends as many audio parts (none or one): the examples' follow.
            examples, example_audio = self.example_views(ctx, len(each[0][1]) if each else 0)
            context = {**ctx.base(), "mode": self.mode, "examples": examples}
            prompts = render_each(
                self.template,
                context,
                "clip",
                [view for (view,), _ in each],
                [clip_audio + example_audio for _, clip_audio in each],
            )
            return [
                PreparedCall((cid,), prompt, self.response_schema)
                for cid, prompt in zip(ctx.item.candidates, prompts, strict=True)
            ]
        opts = joint_options(ctx.options)
        order = presentation_order(
            ctx.item.candidates,
            opts.order,
            seed=ctx.seed,
            item_id=ctx.item.id,
            repeat=ctx.repeat,
            squares=opts.squares,
        )
        template, shown = self.template, list(ctx.context_audio)
        turn: dict[str, Any] = {}
        if ctx.first_pick is not None:
            template, turn, pick_audio = self._second_turn(ctx, order)
            shown += pick_audio
        views, audio = self.clip_views(ctx, order, first_audio=len(shown))
        answer = "ranking" if self.ranks_only else opts.answer
        context = {**ctx.base(), "mode": self.mode, "clips": views, "answer": answer, **turn}
        prompt = render(template, context, [*shown, *audio])
        partial = self.ranks_only or opts.partial
        schema = joint_schema([v.label for v in views], answer, partial=partial)
        return [PreparedCall(tuple(order), prompt, schema)]

    def _second_turn(
        self, ctx: PromptContext, order: list[str]
    ) -> tuple[str, dict[str, Any], list[AudioRef]]:
        """The refine turn's template, the first pick (its label in `order`, its audio sent
        again after the context audio) and the user's reply."""
        if self.second_turn is None or ctx.first_pick is None:
            raise HarnessError(f"prompt {self.name} has no second turn (protocol: refine)")
        index = order.index(ctx.first_pick)
        (view,), audio = self.clip_views(ctx, [ctx.first_pick], first_audio=len(ctx.context_audio))
        view = replace(view, label=clip_labels(len(order))[index])
        return self.second_turn, {"first_pick": view, "feedback": ctx.feedback or ""}, audio


def _plugin_variant(name: str, loaded: Any) -> PromptVariant | None:
    variant = named(PromptVariant)(name, loaded)
    if variant is not None and variant.folder is not None:
        add_template_folder(variant.folder)
    return variant


_BUILT_IN: dict[str, PromptVariant] = {
    "zero_shot": PromptVariant("zero_shot", "zero_shot.jinja", response_schema=POINTWISE_SCHEMA),
    # Free-text reasoning before the JSON: no JSON mode.
    "cot": PromptVariant("cot", "cot.jinja", parse=parse_cot, answer_tokens=350),
    "few_shot": PromptVariant(
        "few_shot",
        "few_shot.jinja",
        response_schema=POINTWISE_SCHEMA,
        uses_examples=True,
        options=FewShotOptions,
    ),
    "joint": PromptVariant(
        "joint",
        "joint.jinja",
        mode="joint",
        parse=parse_joint,
        options=JointOptions,
        answer_tokens=6,
    ),
    "text_only": PromptVariant(
        "text_only", "text_only.jinja", response_schema=POINTWISE_SCHEMA, sends_audio=False
    ),
    "rubric": PromptVariant(
        "rubric",
        "rubric.jinja",
        parse=parse_rubric,
        response_schema=RUBRIC_SCHEMA,
        answer_tokens=28,
    ),
    # A pool of candidates (song titles, clips) ranked for a request: MusiCRS's protocol.
    "listwise": PromptVariant(
        "listwise",
        "listwise.jinja",
        mode="joint",
        parse=parse_ranked_prefix,
        options=JointOptions,
        dialogue_modes=frozenset({"full", "summary", "query", "none"}),
        shows_context_audio=True,
        ranks_only=True,
        second_turn="refine.jinja",
    ),
    # The judge writes the music it would play; a retriever ranks the candidates by it
    # (MetaBGM's describe-then-retrieve; `harness.protocols.describe`).
    "describe": PromptVariant(
        "describe",
        "describe.jinja",
        mode="describe",
        parse=parse_description,
        response_schema=DESCRIPTION_SCHEMA,
        sends_audio=False,
        dialogue_modes=frozenset({"full", "summary", "query", "none"}),
        shows_context_audio=True,
        answer_tokens=60,
    ),
    # Rates a conversational recommender's reply (`protocol: music-crs`).
    "response_judge": PromptVariant(
        "response_judge",
        "response_judge.jinja",
        mode="describe",
        parse=parse_ratings,
        response_schema=RATINGS_SCHEMA,
        sends_audio=False,
        dialogue_modes=frozenset({"full"}),
        answer_tokens=16,
    ),
}
VARIANTS: Registry[PromptVariant] = Registry("prompts", _plugin_variant, _BUILT_IN)


def get_variant(name: str) -> PromptVariant:
    try:
        return VARIANTS[name]
    except KeyError:
        hint = (
            " (summarize is the summariser prompt: use inputs.dialogue: summary)"
            if name == "summarize"
            else ""
        )
        raise ValueError(
            f"unknown prompt variant {name!r} (known: {', '.join(VARIANTS)}){hint}"
        ) from None
