"""A jury's plan: `JudgeCalls`' calls asked of every member under the member's own key (a jury
after its members' runs makes no call); `extra.members` keeps each member's answer."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from harness.calls.answerer import Answerer, ask_until_parsed
from harness.calls.cache import request_key
from harness.core.records import Record
from harness.core.types import ChatRequest
from harness.protocols.plans import Call, JudgeCalls
from providers.jury import Jury, combine


class JuryCalls(JudgeCalls):
    provider: Jury
    _answerers: list[Answerer] | None = None

    def item_calls(self, *args: Any, **kwargs: Any) -> Iterator[Call]:
        assert self.variant is not None
        second = self.variant.second_turn if kwargs.get("first_pick") is not None else None
        hashed = self.template_hash(second or self.variant.template)  # as JudgeCalls does
        for call in super().item_calls(*args, **kwargs):
            keys = tuple(
                request_key(
                    member.identity(),
                    call.request,
                    template=hashed,
                    repeat=None if member.deterministic else call.repeat,
                )
                for member in self.provider.members
            )
            yield replace(call, member_keys=keys)

    async def record(self, call: Call, answerer: Answerer) -> Record:
        assert isinstance(call.request, ChatRequest)
        if self._answerers is None:  # the run's cache and counts, each member's settings
            self._answerers = [
                Answerer(m, m.config, answerer.cache, answerer.stats) for m in self.provider.members
            ]
        candidates = list(call.candidates)
        asked = await asyncio.gather(
            *(
                ask_until_parsed(
                    member,
                    key,
                    call.request,
                    lambda text: self.parse(text, candidates),
                    reask=member.settings.reask,
                )
                for member, key in zip(self._answerers, call.member_keys, strict=True)
            )
        )
        parsed = [a.parsed.scores if a.parsed and a.parsed.error is None else {} for a in asked]
        scores = combine(self.provider.config.combine, parsed, candidates)
        errors = [None if a.error is None else answerer.stats.failed(a.error) for a in asked]
        members = [
            {"label": m.config.label or m.model, "model": m.model, "raw": a.text, "scores": s}
            | {"error": e, "cache_hit": a.cache_hit}
            | {"input_tokens": a.input_tokens, "output_tokens": a.output_tokens}
            for m, a, s, e in zip(self.provider.members, asked, parsed, errors, strict=True)
        ]
        usable = any(parsed)
        return Record(
            item_id=call.item_id,
            candidates=candidates,
            repeat=call.repeat,
            raw=json.dumps({"scores": scores}) if usable else None,
            scores=scores,
            error=errors[0] if all(errors) else None,
            parse_error=None if usable or all(errors) else "no member's answer parsed",
            cache_hit=all(a.cache_hit for a in asked),
            input_tokens=sum(a.input_tokens or 0 for a in asked),
            output_tokens=sum(a.output_tokens or 0 for a in asked),
            extra={"members": members},
        )
