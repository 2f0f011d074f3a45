"""The user's reply to a refine run's first pick (`refine: {feedback: ...}`): `aspects` (MuseChat's
simulated user: "with" the gold's aspects the pick lacks, "without" the pick's the gold lacks,
each cut to `max_aspects`, those the query names left out with `skip_query_aspects`), `item`
(the item's own `feedback` text) or `simulator` (an LLM plays the user: `user_simulator:`,
prompt `user_simulator.jinja`, answering `{"feedback": "..."}` through the call path)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from harness.calls.answerer import ask_until_parsed, cached_parse
from harness.calls.cache import ResponseCache, request_key
from harness.calls.prompting.parsing import ParsedText, read_text_answer, text_field
from harness.calls.prompting.templates import render
from harness.config.blocks import RefineOptions
from harness.core.dataset import Clip, Dataset, Item
from harness.core.errors import HarnessError
from harness.core.types import ChatRequest, ProviderConfig
from harness.protocols.plans import side_answerer

SIMULATOR_TEMPLATE = "user_simulator.jinja"
FEEDBACK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"feedback": {"type": "string"}},
    "required": ["feedback"],
}
SATISFIED = "Yes, that is the one I was looking for."
SOMETHING_ELSE = "Not quite. Something else along the same lines, please."


def reference_ids(item: Item) -> list[str]:
    """The item's candidates of maximal relevance, in candidate order (the first: its gold)."""
    best = max(item.relevance.values())
    return [cid for cid in item.candidates if item.relevance[cid] == best]


def gold_of(item: Item) -> str:
    return reference_ids(item)[0]


def _listed(aspects: Sequence[str], conjunction: str) -> str:
    if len(aspects) == 1:
        return aspects[0]
    return f"{', '.join(aspects[:-1])} {conjunction} {aspects[-1]}"


def aspect_feedback(item: Item, clips: dict[str, Clip], pick: str, options: RefineOptions) -> str:
    gold = gold_of(item)
    if pick == gold:
        return SATISFIED
    gold_aspects, pick_aspects = clips[gold].aspects, clips[pick].aspects
    gold_set = {a.strip().lower() for a in gold_aspects}
    pick_set = {a.strip().lower() for a in pick_aspects}
    wanted = [a for a in gold_aspects if a.strip().lower() not in pick_set]
    if options.skip_query_aspects and item.query:
        query = item.query.lower()
        wanted = [a for a in wanted if a.strip().lower() not in query]
    unwanted = [a for a in pick_aspects if a.strip().lower() not in gold_set]
    wanted = wanted[: options.max_aspects] if options.mention != "unwanted" else []
    unwanted = unwanted[: options.max_aspects] if options.mention != "wanted" else []
    if not wanted and not unwanted:
        return SOMETHING_ELSE
    said = []
    if wanted:
        said.append(f"with {_listed(wanted, 'and')}")
    if unwanted:
        said.append(f"without {_listed(unwanted, 'or')}")
    return f"Not quite. I would like something {', and '.join(said)}."


def item_feedback(item: Item) -> str:
    text = (item.model_extra or {}).get("feedback")
    if not isinstance(text, str) or not text.strip():
        raise HarnessError(f"item {item.id} has no feedback (refine feedback: item)")
    return text


def check_feedback_source(options: RefineOptions, dataset: Dataset) -> None:
    """Refuse, before any call, items that cannot give the reply the run asks for."""
    for item in dataset.items:
        if item.relevance_form is None:
            raise HarnessError(f"item {item.id} has no relevance judgement: refine needs a gold")
        if options.feedback == "item":
            item_feedback(item)
        if options.feedback == "aspects":
            bare = [cid for cid in item.candidates if not dataset.clips[cid].aspects]
            if bare:
                raise HarnessError(
                    f"clip {bare[0]} (item {item.id}) has no aspects: refine feedback: aspects "
                    "compares the gold's aspects with the first pick's; use feedback: item or "
                    "simulator"
                )


@dataclass
class Reply:
    """What the user answered to the first pick, or why there is no answer."""

    text: str | None
    source: str
    error: str | None = None
    raw: str | None = None
    cache_hit: bool | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None

    def to_extra(self) -> dict[str, Any]:
        named = {"feedback" if k == "text" else f"feedback_{k}": v for k, v in asdict(self).items()}
        return {k: v for k, v in named.items() if v is not None}


def _clip_words(clip: Clip) -> str:
    return clip.text or ", ".join(clip.aspects)


def simulator_request(item: Item, clips: dict[str, Clip], pick: str) -> ChatRequest:
    """The user simulator's prompt: the request, the music wanted, the music suggested."""
    gold = gold_of(item)
    context = {
        "request": item.query or item.summary or item.dialogue_text(),
        "target": _clip_words(clips[gold]),
        "pick": _clip_words(clips[pick]),
        "same": pick == gold,
    }
    prompt = render(SIMULATOR_TEMPLATE, context, [])
    return ChatRequest(prompt.system, prompt.parts, FEEDBACK_SCHEMA)


def _parse(text: str) -> ParsedText:
    return read_text_answer(lambda answer: text_field(answer, "feedback"), text)


class UserSimulator:
    """An LLM playing the user, through its own call path on the run's cache."""

    def __init__(self, block: ProviderConfig, cache: ResponseCache) -> None:
        self.answerer = side_answerer(block, cache, "user_simulator")

    def key(self, request: ChatRequest) -> str:
        return request_key(
            self.answerer.identity,
            request,
            audio=False,
            purpose="user_simulator",
            template=self.answerer.template_hash(SIMULATOR_TEMPLATE),
        )

    async def reply(self, item: Item, clips: dict[str, Clip], pick: str) -> Reply:
        request = simulator_request(item, clips, pick)
        asked = await ask_until_parsed(
            self.answerer,
            self.key(request),
            request,
            _parse,
            reask=self.answerer.settings.reask,
        )
        reply = Reply(None, "simulator", input_tokens=asked.input_tokens)
        reply.output_tokens = asked.output_tokens
        reply.cache_hit = asked.cache_hit if asked.text is not None else None
        stats = self.answerer.stats  # the runner counts the run's own records, not these
        stats.calls += 1
        stats.cache_hits += bool(reply.cache_hit)
        stats.input_tokens += asked.input_tokens or 0
        stats.output_tokens += asked.output_tokens or 0
        stats.parse_failures += asked.parsed is not None and asked.parsed.error is not None
        if asked.error is not None:
            stats.errors += 1
            reply.error = stats.failed(asked.error)
            return reply
        assert asked.parsed is not None
        reply.text, reply.error = asked.parsed.text, asked.parsed.error
        if reply.text is None:
            reply.raw = asked.text
        return reply

    def cached_reply(self, item: Item, clips: dict[str, Clip], pick: str) -> str | None:
        """The reply the cache already holds, or None (`cached_parse`)."""
        request = simulator_request(item, clips, pick)
        parsed = cached_parse(self.answerer, self.key(request), request, _parse)
        return None if parsed is None else parsed.text

    async def aclose(self) -> None:
        await self.answerer.aclose()
