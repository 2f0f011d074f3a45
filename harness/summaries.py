"""One-sentence dialogue summaries for `inputs.dialogue: summary`.

An item's own `summary` is used as it is. Where it has none, the summariser prompt
(`prompts/summarize.jinja`) goes to a judge provider: the experiment's `summarizer:` block,
or by default the run's own provider when that is a judge. Answers go through the runner's
cache, retries and rate limit like every other call, so a re-run makes no new calls, and
every summary of a run is written to `results/<run>/summaries.jsonl` for inspection.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.cache import cache_key
from harness.dataset import Item
from harness.errors import DatasetError, HarnessError, ProviderError
from harness.fewshot import dialogue_key
from harness.parsing import ParseError, parse_summary
from harness.prompts import render, template_hash
from harness.records import Record
from harness.secrets import scrub
from providers import ChatRequest, Judge, ProviderConfig

if TYPE_CHECKING:
    from harness.runner import Runner

SUMMARY_TEMPLATE = "summarize.jinja"
SUMMARY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"summary": {"type": "string"}},
    "required": ["summary"],
}


@dataclass
class SummaryLine:
    """One line of summaries.jsonl."""

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

    async def ensure(self, runner: Runner, items: Iterable[tuple[Item, Path]]) -> None:
        """Generate the summaries that `items` (each with its dataset folder) lack, write
        summaries.jsonl, and raise DatasetError naming an item whose summary could not be made."""
        sources = {id(item): (item, folder) for item, folder in items}
        todo = {
            dialogue_key(item): (item, folder)
            for item, folder in sources.values()
            if not item.summary and dialogue_key(item) not in self._generated
        }
        made: dict[str, SummaryLine] = {}
        if todo:
            first, folder = next(iter(todo.values()))
            summarizer, owned = _summarizer(runner, first, folder)
            try:
                if runner.show_progress:
                    runner.console.print(
                        f"[dim]summarising {len(todo)} dialogue(s) with "
                        f"{summarizer.provider.config.name} ({summarizer.provider.model})[/]"
                    )
                lines = await asyncio.gather(
                    *(summarize(summarizer, item) for item, _ in todo.values())
                )
            finally:
                if owned:
                    await summarizer.provider.aclose()
            self.provider, self.model = summarizer.config.provider, summarizer.provider.model
            if owned:
                runner.stats.model_calls += summarizer.stats.model_calls
                runner.stats.retries += summarizer.stats.retries
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
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("w", encoding="utf-8") as handle:
            for item in items:
                key = dialogue_key(item)
                if item.summary:
                    line = SummaryLine(item.id, item.summary, "dataset", len(item.summary.split()))
                elif key in made:
                    line = SummaryLine(**{**asdict(made[key]), "item_id": item.id})
                else:  # generated by an earlier `ensure` of this runner
                    summary = self._generated[key]
                    line = SummaryLine(item.id, summary, "generated", len(summary.split()))
                fields = {k: v for k, v in asdict(line).items() if v is not None}
                handle.write(json.dumps(fields, ensure_ascii=False) + "\n")


def _summarizer(runner: Runner, first: Item, folder: Path) -> tuple[Runner, bool]:
    """The runner whose provider writes summaries, and whether it was made here (to close)."""
    from harness.runner import Runner

    config = runner.config
    wanted: ProviderConfig | None = config.summarizer
    if wanted is None or wanted == config.provider:
        if isinstance(runner.provider, Judge):
            return runner, False
        raise DatasetError(
            folder / "items.jsonl",
            None,
            f"item {first.id} has no summary (needed by inputs.dialogue: summary), and "
            f"{config.provider.name} is not a judge that could write one: add "
            "`summarizer: {name: ..., model: ...}` to the experiment file",
        )
    sub = Runner(
        config.model_copy(update={"provider": wanted, "summarizer": None}),
        cache=runner.cache,
        results_dir=runner.out_dir,
        console=runner.console,
        show_progress=False,
    )
    if not isinstance(sub.provider, Judge):
        raise HarnessError(f"summarizer {wanted.name!r} is not a judge provider")
    return sub, True


async def summarize(runner: Runner, item: Item) -> SummaryLine:
    """The item's one-sentence summary from `runner`'s provider, through its cache, retries
    and re-asks; a failure is reported in the line, never turned into text."""
    provider = runner.provider
    request = summary_request(item)
    key = cache_key(
        {
            "purpose": "summary",
            "provider": provider.identity(),
            "system": request.system,
            "user": request.user_text,
            "schema": request.response_schema,
            "template": template_hash(SUMMARY_TEMPLATE),
        }
    )
    line = SummaryLine(
        item.id, None, "generated", provider=provider.config.name, model=provider.model
    )
    for attempt in range(runner.config.provider.reask + 1):
        try:
            answer, hit = await runner.answer(
                key if attempt == 0 else f"{key}:reask{attempt}", request
            )
        except ProviderError as exc:
            line.error = scrub(f"{exc.kind}: {exc}")
            return line
        line.cache_hit = hit if line.cache_hit is None else line.cache_hit and hit
        for name in ("input_tokens", "output_tokens"):
            if answer.get(name) is not None:
                setattr(line, name, (getattr(line, name) or 0) + answer[name])
        try:
            line.summary = parse_summary(answer["text"])
        except ParseError as exc:
            line.error, line.raw = str(exc), answer["text"]
            continue
        line.error, line.raw, line.words = None, None, len(line.summary.split())
        break
    return line
