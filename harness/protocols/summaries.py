"""One-sentence dialogue summaries for `inputs.dialogue: summary`: an item's own, else the
summariser prompt's answer from the `summarizer:` block (default: the run's judge) through the
call path; every summary of a run goes to `results/<run>/summaries.jsonl`."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

from rich.console import Console

from harness.calls.answerer import (
    Answerer,
    ask_until_parsed,
    cached_parse,
)
from harness.calls.cache import request_key
from harness.calls.prompting.fewshot import dialogue_key
from harness.calls.prompting.parsing import parse_summary, read_text_answer
from harness.calls.prompting.templates import render
from harness.config.experiment import ExperimentConfig
from harness.core.dataset import Item
from harness.core.errors import DatasetError, HarnessError
from harness.core.files import write_jsonl
from harness.core.records import Record
from harness.core.sanitize import terminal_text
from harness.core.types import ChatRequest, ProviderConfig
from harness.protocols.plans import side_answerer

SUMMARY_TEMPLATE = "summarize.jinja"
SUMMARY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"summary": {"type": "string"}},
    "required": ["summary"],
}


@dataclass
class SummaryLine:
    item_id: str
    summary: str | None
    source: str  # "dataset" or "generated"
    words: int | None = None
    provider: str | None = None
    model: str | None = None
    cache_hit: bool | None = None
    error: str | None = None
    raw: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None


def summary_request(item: Item) -> ChatRequest:
    context = {
        "dialogue": [{"speaker": t.speaker, "text": t.text} for t in item.dialogue],
        "summary": None,
        "dialogue_mode": "full",
    }
    prompt = render(SUMMARY_TEMPLATE, context, [])
    return ChatRequest(prompt.system, prompt.parts, SUMMARY_SCHEMA)


class Summaries:
    """Summaries by dialogue content, filled by `ensure` before a run prepares its calls."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._generated: dict[str, str] = {}
        self.records: list[Record] = []  # the summariser's calls, for usage and cost
        self.provider: ProviderConfig | None = None
        self.model: str | None = None
        self.endpoint: dict[str, Any] | None = None  # where the summariser's requests went

    def get(self, item: Item) -> str:
        if item.summary:
            return item.summary
        try:
            return self._generated[dialogue_key(item)]
        except KeyError:
            raise HarnessError(
                f"item {item.id} has no summary and none has been generated "
                "(inputs.dialogue: summary)"
            ) from None

    async def ensure(
        self,
        items: Iterable[tuple[Item, Path]],
        *,
        config: ExperimentConfig,
        answerer: Answerer,
        console: Console,
        show_progress: bool = True,
    ) -> None:
        """Generate the summaries `items` (with their dataset folders) lack; write the file."""
        sources = {id(item): (item, folder) for item, folder in items}
        todo = {
            dialogue_key(item): (item, folder)
            for item, folder in sources.values()
            if not item.summary and dialogue_key(item) not in self._generated
        }
        made: dict[str, SummaryLine] = {}
        if todo:
            first, folder = next(iter(todo.values()))
            summarizer, owned = summarizer_for(config, answerer, first, folder)
            provider = summarizer.provider
            try:
                if show_progress:
                    console.print(
                        f"[dim]summarising {len(todo)} dialogue(s) with "
                        f"{terminal_text(provider.config.name)} ({terminal_text(provider.model)})[/]"
                    )
                lines = await asyncio.gather(
                    *(summarize(summarizer, item) for item, _ in todo.values())
                )
            finally:
                if owned:
                    await summarizer.aclose()
            self.provider, self.model = summarizer.settings, provider.model
            self.endpoint = provider.endpoint()
            if owned:
                answerer.stats.model_calls += summarizer.stats.model_calls
                answerer.stats.retries += summarizer.stats.retries
            for key, line in zip(todo, lines, strict=True):
                self.records.append(
                    Record(
                        item_id=line.item_id,
                        candidates=[],
                        raw=line.raw if line.summary is None else line.summary,
                        scores={},
                        cache_hit=bool(line.cache_hit),
                        input_tokens=line.input_tokens,
                        output_tokens=line.output_tokens,
                        extra={"purpose": "summary"},
                    )
                )
                made[key] = line
                if line.summary is not None:
                    self._generated[key] = line.summary
        failed = [(key, line) for key, line in made.items() if line.summary is None]
        if failed:  # nothing is written: a failed run leaves no results behind
            key, line = failed[0]
            item, folder = todo[key]
            more = f" ({len(failed) - 1} more)" if len(failed) > 1 else ""
            answer = f"; it answered {line.raw[:80]!r}" if line.raw else ""
            raise DatasetError(
                folder / "items.jsonl",
                None,
                f"item {item.id} has no summary, and the summariser ({line.provider}, "
                f"{line.model}) could not write one{more}: {line.error}{answer}",
            )
        self._write([item for item, _ in sources.values()], made)

    def _write(self, items: list[Item], made: dict[str, SummaryLine]) -> None:
        def lines() -> Iterator[dict[str, Any]]:
            for item in items:
                key = dialogue_key(item)
                if item.summary:
                    line = SummaryLine(item.id, item.summary, "dataset", len(item.summary.split()))
                elif key in made:
                    line = SummaryLine(**{**asdict(made[key]), "item_id": item.id})
                else:  # generated by an earlier `ensure` of this runner
                    summary = self._generated[key]
                    line = SummaryLine(item.id, summary, "generated", len(summary.split()))
                yield {k: v for k, v in asdict(line).items() if v is not None}

        write_jsonl(self.path, lines())


def summarizer_for(
    config: ExperimentConfig, answerer: Answerer, first: Item, folder: Path
) -> tuple[Answerer, bool]:
    """The summariser's call path (the run's own judge, else the `summarizer:` block's) and
    whether it was made here (to close)."""
    wanted: ProviderConfig | None = config.summarizer
    if wanted is None or wanted == config.provider:
        if answerer.provider.kind == "judge":
            return answerer, False
        raise DatasetError(
            folder / "items.jsonl",
            None,
            f"item {first.id} has no summary (needed by inputs.dialogue: summary), and "
            f"{config.provider.name} is not a judge that could write one: add "
            "`summarizer: {name: ..., model: ...}` to the experiment file",
        )
    return side_answerer(wanted, answerer.cache, "summarizer"), True


_parse = partial(read_text_answer, parse_summary)


def summary_key(answerer: Answerer, request: ChatRequest) -> str:
    """The summariser's key recipe (shared with stage 2's captions: paid once)."""
    return request_key(
        answerer.identity,
        request,
        audio=False,
        purpose="summary",
        template=answerer.template_hash(SUMMARY_TEMPLATE),
    )


def cached_summary(answerer: Answerer, item: Item) -> str | None:
    """The summary the cache already holds for `item`, or None (`cached_parse`)."""
    request = summary_request(item)
    parsed = cached_parse(answerer, summary_key(answerer, request), request, _parse)
    return None if parsed is None else parsed.text


async def summarize(answerer: Answerer, item: Item) -> SummaryLine:
    """The item's summary through the call path; a failure is reported, never made text."""
    provider = answerer.provider
    request = summary_request(item)
    asked = await ask_until_parsed(
        answerer, summary_key(answerer, request), request, _parse, reask=answerer.settings.reask
    )
    line = SummaryLine(
        item.id, None, "generated", provider=provider.config.name, model=provider.model
    )
    line.input_tokens, line.output_tokens = asked.input_tokens, asked.output_tokens
    line.cache_hit = asked.cache_hit if asked.text is not None else None
    if asked.error is not None:
        line.error = asked.error_text()
        if asked.parsed is not None and asked.parsed.error is not None:
            line.raw = asked.text
        return line
    assert asked.parsed is not None
    if asked.parsed.text is None:
        line.error, line.raw = asked.parsed.error, asked.text
        return line
    line.summary = asked.parsed.text
    line.words = len(line.summary.split())
    return line
