"""A local judge's prompt as its checkpoint ships it: the family's own transformers processor
(its chat template, tokenizer and audio feature extractor), loaded without remote code."""

from __future__ import annotations

import inspect
from functools import cache
from typing import Any

from harness.core.types import AudioRef, ChatRequest
from providers.local._settings import LocalSettings, hf

_AUDIO_PARTS = frozenset({"feature_extractor", "audio_processor"})


class MissingChatTemplate(ValueError):
    pass


class _NotUsed:
    """Stands in for the processor's image or video part, which the judges never call."""

    def __repr__(self) -> str:
        return "<not used: the judges send text and audio only>"


NOT_USED = _NotUsed()


@cache
def _audio_only(base: type) -> type:
    """`base` accepting the stand-in for its vision parts (and nothing else changed)."""

    checked: Any = getattr(base, "check_argument_for_proper_class")  # noqa: B009

    def check_argument_for_proper_class(self: Any, argument_name: str, argument: Any) -> Any:
        if argument is NOT_USED:
            return _NotUsed
        return checked(self, argument_name, argument)

    return type(
        base.__name__, (base,), {"check_argument_for_proper_class": check_argument_for_proper_class}
    )


def load_processor(class_name: str, settings: LocalSettings) -> Any:
    """The family's processor from the checkpoint: its tokenizer, audio feature extractor,
    chat template and processor options; left padding for batched generation."""
    tf = hf()
    base = getattr(tf, class_name)
    kwargs = settings.load_kwargs()
    processor_dict, _ = base.get_processor_dict(settings.checkpoint, **kwargs)
    template = processor_dict.get("chat_template")
    if not template:
        raise MissingChatTemplate(
            f"{settings.checkpoint} ships no chat template for {class_name} "
            "(chat_template.jinja or chat_template.json)"
        )
    parts: dict[str, Any] = {}
    for attribute in base.get_attributes():
        if "tokenizer" in attribute:
            parts[attribute] = tf.AutoTokenizer.from_pretrained(settings.checkpoint, **kwargs)
        elif attribute in _AUDIO_PARTS:
            parts[attribute] = tf.AutoFeatureExtractor.from_pretrained(
                settings.checkpoint, **kwargs
            )
        else:
            parts[attribute] = NOT_USED
    accepted = set(inspect.signature(base.__init__).parameters) - set(parts)
    options = {k: v for k, v in processor_dict.items() if k in accepted and k != "chat_template"}
    processor = _audio_only(base)(**parts, **options, chat_template=template)
    processor.tokenizer.padding_side = "left"
    return processor


def chat_messages(request: ChatRequest) -> list[dict[str, Any]]:
    """The request as chat messages: the system text, the user turn's text and audio parts in
    order, then each follow-up as an assistant turn (when it said anything) and a user turn."""

    def text(value: str) -> dict[str, Any]:
        return {"type": "text", "text": value}

    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": [text(request.system)]})
    content = [{"type": "audio"} if isinstance(p, AudioRef) else text(p) for p in request.parts]
    messages.append({"role": "user", "content": content})
    for turn in request.follow_ups:
        if turn.answer:
            messages.append({"role": "assistant", "content": [text(turn.answer)]})
        messages.append({"role": "user", "content": [text(turn.reply)]})
    return messages


def prompt_text(processor: Any, request: ChatRequest) -> str:
    """The prompt as the checkpoint's chat template renders it (audio as placeholders)."""
    rendered: str = processor.apply_chat_template(
        chat_messages(request), tokenize=False, add_generation_prompt=True
    )
    return rendered
