"""The user's reply to a refine run's first pick (`protocol: refine`).

Three sources (`refine: {feedback: ...}`):

- `aspects` (default), a deterministic simulated user in the manner of MuseChat, which built
  its second-turn requests from the music tags of the target and of the first pick: the
  aspects the gold clip has and the first pick lacks ("with ...") and those the pick has and
  the gold lacks ("without ..."), each side cut to `max_aspects` in the order of the clip's
  aspect list, turned into one sentence. Wanted aspects the item's query already names are
  left out (`skip_query_aspects`), so the reply adds what the query did not say.
- `item`: the item's own `feedback` text, whatever the first pick (a pre-written reply).
- `simulator`: an LLM plays the user (`user_simulator:` block, prompt
  `prompts/user_simulator.jinja`): it is shown the request, the gold's caption and the
  pick's caption, and answers `{"feedback": "..."}`. Its calls go through the call path
  (cache, retries, re-asks) like every other call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.calls.answerer import Answerer, RunStats, ask_until_parsed, reask_step
from harness.calls.cache import ResponseCache, request_key
from harness.calls.prompting.parsing import ParseError, text_field
from harness.calls.prompting.templates import render
from harness.config.blocks import RefineOptions
from harness.core.dataset import Clip, Dataset, Item
from harness.core.errors import HarnessError
from harness.core.types import ChatRequest, ProviderConfig
from providers import create_provider

SIMULATOR_TEMPLATE = "user_simulator.jinja"
FEEDBACK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"feedback": {"type": "string"}},
    "required": ["feedback"],
}
SATISFIED = "Yes, that is the one I was looking for."
SOMETHING_ELSE = "Not quite. Something else along the same lines, please."


def gold_of(item: Item) -> str:
    """The item's gold candidate: the first of maximal relevance in candidate order."""
    relevance = item.relevance
    best = max(relevance.values())
    return next(cid for cid in item.candidates if relevance[cid] == best)


def _listed(aspects: Sequence[str], conjunction: str) -> str:
    if len(aspects) == 1:
        return aspects[0]
    return f"{', '.join(aspects[:-1])} {conjunction} {aspects[-1]}"


def aspect_feedback(item: Item, clips: dict[str, Clip], pick: str, options: RefineOptions) -> str:
    """The deterministic simulated user's reply to `pick` (see the module docstring)."""
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
    """Refuse, before any call, items that cannot give the reply the run asks for: no
    relevance judgement (no gold), no `feedback` text, or candidates without aspects."""
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
        fields = {
            "feedback": self.text,
            "feedback_source": self.source,
            "feedback_error": self.error,
            "feedback_raw": self.raw,
            "feedback_cache_hit": self.cache_hit,
            "feedback_input_tokens": self.input_tokens,
            "feedback_output_tokens": self.output_tokens,
        }
        return {k: v for k, v in fields.items() if v is not None}


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


@dataclass(frozen=True)
class _Parsed:
    text: str | None
    error: str | None


def _parse(text: str) -> _Parsed:
    try:
        return _Parsed(text_field(text, "feedback"), None)
    except ParseError as exc:
        return _Parsed(None, str(exc))


class UserSimulator:
    """An LLM playing the user, through its own call path on the run's cache."""

    def __init__(self, block: ProviderConfig, cache: ResponseCache) -> None:
        provider = create_provider(block)
        if provider.kind != "judge":
            raise HarnessError(f"user_simulator {block.name!r} is not a judge provider")
        self.answerer = Answerer(provider, block, cache, RunStats())

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
        """The reply the cache already holds (replaying re-asks), or None: the dry run's."""
        request = simulator_request(item, clips, pick)
        first = key = self.key(request)
        for _ in range(self.answerer.settings.reask + 1):
            answer = self.answerer.cache.get(key, "chat")
            if answer is None:
                return None
            parsed = _parse(answer["text"])
            if parsed.text is not None:
                return parsed.text
            request, key = reask_step(first, request, answer["text"], parsed.error)
        return None

    async def aclose(self) -> None:
        self.answerer.close()
        await self.answerer.provider.aclose()
