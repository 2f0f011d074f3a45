"""The one runner: prepares every call of an experiment, answers it from the cache or the
provider (with bounded concurrency, rate limit and retries), parses, streams records and
writes the run's metrics and report."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from harness.answering import Answerer, RunStats
from harness.cache import ResponseCache, cache_key
from harness.config import ExperimentConfig
from harness.console import terminal
from harness.dataset import Dataset, Item, load_dataset
from harness.errors import ProviderError
from harness.fewshot import Example, check_no_leak, load_examples
from harness.joint import position_top1_rates
from harness.metrics import Aggregate, aggregate, build_matrix
from harness.parsing import ParsedAnswer
from harness.pricing import run_cost
from harness.prompts import template_hash
from harness.records import (
    Record,
    RecordWriter,
    predictions_from_records,
    scan_partial,
    write_predictions,
    write_sorted,
)
from harness.report import write_run_report
from harness.secrets import scrub
from harness.summaries import Summaries
from harness.variants import PromptContext, PromptVariant, get_variant
from providers import (
    ChatRequest,
    Judge,
    Provider,
    ScoreCandidate,
    Scorer,
    ScoreRequest,
    create_provider,
)


@dataclass(frozen=True)
class Call:
    """One model call to answer: from the cache if its key is there."""

    item_id: str
    repeat: int
    candidates: tuple[str, ...]
    request: ChatRequest | ScoreRequest
    key: str


@dataclass
class RunResult:
    config: ExperimentConfig
    out_dir: Path
    stats: RunStats
    aggregate: Aggregate

    @property
    def complete(self) -> bool:
        return self.stats.errors == 0


class Runner:
    def __init__(
        self,
        config: ExperimentConfig,
        *,
        cache: ResponseCache,
        results_dir: Path = Path("results"),
        provider: Provider | None = None,
        console: Console | None = None,
        show_progress: bool = True,
    ) -> None:
        self.config = config
        self.cache = cache
        self.out_dir = results_dir / config.results_subdir
        self.provider = provider or create_provider(config.provider)
        self.console = console or terminal(stderr=True)
        self.show_progress = show_progress
        self.stats = RunStats()
        self.answerer = Answerer(self.provider, config.provider, cache, self.stats)
        self.variant: PromptVariant | None = (
            get_variant(config.prompt) if isinstance(self.provider, Judge) else None
        )
        self.summaries = Summaries(self.out_dir / "summaries.jsonl")

    # ---------------------------------------------------------------- preparing calls
    def dataset(self) -> Dataset:
        dataset = load_dataset(self.config.dataset)
        if self.config.limit:
            dataset = dataset.subset([i.id for i in dataset.items[: self.config.limit]])
        return dataset

    def summary_of(self, item: Item) -> str | None:
        """The item's summary, or the one generated for it by `prepare_summaries`."""
        if self.config.inputs.dialogue != "summary":
            return None
        return self.summaries.get(item)

    async def prepare_summaries(self, dataset: Dataset) -> None:
        """Generate (or take from the cache) the summaries that items and examples lack."""
        if self.config.inputs.dialogue == "summary":
            evaluated = [(item, Path(self.config.dataset)) for item in dataset.items]
            examples = [(e.item, e.source) for e in self.examples(dataset)]
            await self.summaries.ensure(self, evaluated + examples)

    def examples(self, dataset: Dataset) -> tuple[Example, ...]:
        """Worked examples of a few-shot prompt; refused if one is evaluated in this run."""
        if self.variant is None or not self.variant.uses_examples:
            return ()
        examples = load_examples(self.config.prompt_options, self.config.dataset)
        check_no_leak(examples, dataset.items, self.config.dataset)
        return examples

    def prepare(self, dataset: Dataset) -> list[Call]:
        return list(self.iter_calls(dataset))

    def iter_calls(self, dataset: Dataset) -> Iterator[Call]:
        """The run's calls one at a time, so that the first can be sent while the rest are
        still being rendered."""
        identity = self.provider.identity()
        vary_by_repeat = not self.provider.deterministic
        hashed = template_hash(self.variant.template) if self.variant else None
        examples = tuple(
            replace(e, summary=self.summary_of(e.item)) for e in self.examples(dataset)
        )
        for repeat in range(self.config.repeats):
            for item in dataset.items:
                summary = self.summary_of(item)
                if isinstance(self.provider, Scorer):
                    yield self._score_call(dataset, item, summary, repeat, identity)
                    continue
                assert self.variant is not None
                ctx = PromptContext(
                    item=item,
                    clips=dataset.clips,
                    dialogue_mode=self.config.inputs.dialogue,
                    music_mode=self.config.inputs.music,
                    summary=summary,
                    repeat=repeat,
                    options=self.config.prompt_options,
                    examples=examples,
                    seed=self.config.seed,
                )
                for prepared in self.variant.prepare(ctx):
                    request = ChatRequest(
                        prepared.prompt.system, prepared.prompt.parts, prepared.schema
                    )
                    key = cache_key(
                        {
                            "provider": identity,
                            "system": request.system,
                            "user": request.user_text,
                            "audio": [a.sha256 for a in request.audio],
                            "schema": request.response_schema,
                            "template": hashed,
                            "repeat": repeat if vary_by_repeat else None,
                        }
                    )
                    yield Call(item.id, repeat, prepared.candidates, request, key)

    def _score_call(
        self,
        dataset: Dataset,
        item: Item,
        summary: str | None,
        repeat: int,
        identity: dict[str, Any],
    ) -> Call:
        from harness.audio import audio_ref

        music = self.config.inputs.music
        candidates = tuple(
            ScoreCandidate(
                cid,
                dataset.clips[cid].caption,
                audio_ref(cid, dataset.clips[cid].path) if music == "audio" else None,
            )
            for cid in item.candidates
        )
        query = summary if summary is not None else item.dialogue_text()
        request = ScoreRequest(query, candidates, music, item.id, repeat)
        key = cache_key(
            {
                "provider": identity,
                "query": query,
                "clips": [c.audio.sha256 if c.audio else c.caption for c in candidates],
                "item": item.id if not self.provider.deterministic else None,
                "repeat": repeat if not self.provider.deterministic else None,
            }
        )
        return Call(item.id, repeat, item.candidates, request, key)

    async def answer(
        self, key: str, request: ChatRequest | ScoreRequest
    ) -> tuple[dict[str, Any], bool]:
        """The answer for `key` through this run's call path (see `Answerer.answer`)."""
        return await self.answerer.answer(key, request)

    async def run_call(self, call: Call) -> Record:
        record = Record(
            item_id=call.item_id,
            candidates=list(call.candidates),
            repeat=call.repeat,
            scores=dict.fromkeys(call.candidates),
        )
        try:
            answer, hit = await self.answer(call.key, call.request)
        except ProviderError as exc:
            self._fail(record, exc)
            return record
        record.cache_hit = hit
        self._account(record, answer)
        if isinstance(call.request, ScoreRequest):
            record.scores = dict(zip(call.candidates, answer["scores"], strict=True))
            return record
        parsed = self._parse(answer["text"], call)
        for attempt in range(1, self.config.provider.reask + 1):
            if parsed.error is None:
                break
            record.attempts.append(answer["text"])
            try:
                answer, hit = await self.answer(f"{call.key}:reask{attempt}", call.request)
            except ProviderError as exc:
                self._fail(record, exc)
                break
            record.cache_hit = record.cache_hit and hit
            self._account(record, answer)
            parsed = self._parse(answer["text"], call)
        record.raw = answer["text"]
        record.scores = parsed.scores
        record.parse_error = parsed.error
        record.extra.update(parsed.extra)
        return record

    def _fail(self, record: Record, exc: ProviderError) -> None:
        message = scrub(str(exc))
        record.error = f"{exc.kind}: {message}"
        self.stats.error_kinds[exc.kind] += 1
        self.stats.first_errors.setdefault(exc.kind, message)

    def _parse(self, text: str, call: Call) -> ParsedAnswer:
        assert self.variant is not None
        return self.variant.parse(text, list(call.candidates))

    def _account(self, record: Record, answer: dict[str, Any]) -> None:
        for name in ("input_tokens", "output_tokens"):
            if answer.get(name) is not None:
                setattr(record, name, (getattr(record, name) or 0) + answer[name])
        record.latency_s = answer.get("latency_s")
        if answer.get("extra"):
            record.extra.update(answer["extra"])

    # ---------------------------------------------------------------- the whole run
    async def run(self) -> RunResult:
        started = time.perf_counter()
        dataset = self.dataset()
        await self.prepare_summaries(dataset)
        calls = self.iter_calls(dataset)
        first = next(calls, None)  # set-up and template errors stop the run before any call
        self.out_dir.mkdir(parents=True, exist_ok=True)
        records_path = self.out_dir / "records.jsonl"
        # Streamed to a partial file and renamed when complete: records.jsonl is never left
        # half-written, and a partial file found here means the last run was killed.
        partial = records_path.with_name("records.partial.jsonl")
        self._report_interrupted(partial)
        writer = RecordWriter(partial)
        records: list[Record] = []
        try:
            with self._progress() as progress:
                task = progress.add_task(self.config.name, total=None, hits=0, failed=0, bad=0)

                async def one(call: Call) -> None:
                    record = await self.run_call(call)
                    writer.write(record)
                    records.append(record)
                    self._count(record)
                    progress.update(
                        task,
                        advance=1,
                        hits=self.stats.cache_hits,
                        failed=self.stats.errors,
                        bad=self.stats.parse_failures,
                    )

                everything = calls if first is None else itertools.chain([first], calls)
                pending = await self._start_all(everything, one)
                progress.update(task, total=len(pending))
                await asyncio.gather(*pending)
        finally:
            writer.close()
            self.answerer.close()
            await self.provider.aclose()
        item_order = [item.id for item in dataset.items]
        write_sorted(records_path, records, item_order)
        partial.unlink()
        result = self._finish(dataset, records, started)
        return result

    async def _start_all(
        self, calls: Iterable[Call], one: Callable[[Call], Awaitable[None]]
    ) -> list[asyncio.Future[None]]:
        """Start each call as soon as it is prepared, yielding to the event loop after every
        `max_concurrency` calls, so that rendering the rest overlaps the first requests."""
        started: list[asyncio.Future[None]] = []
        batch = self.config.provider.max_concurrency
        try:
            for call in calls:
                started.append(asyncio.ensure_future(one(call)))
                if len(started) % batch == 0:
                    await asyncio.sleep(0)
        except BaseException:
            for future in started:
                future.cancel()
            await asyncio.gather(*started, return_exceptions=True)
            raise
        return started

    def _report_interrupted(self, partial: Path) -> None:
        if not partial.exists():
            return
        self.stats.resumed_records, self.stats.torn_lines = scan_partial(partial)
        torn = self.stats.torn_lines
        self.console.print(
            f"[yellow]resuming[/] {self.config.name}: an interrupted run left "
            f"{self.stats.resumed_records} complete record(s)"
            + (f" and {torn} half-written line(s), which are dropped" if torn else "")
            + f" in {partial}; every answer it received comes back from the cache",
            highlight=False,
        )

    def _count(self, record: Record) -> None:
        self.stats.calls += 1
        self.stats.cache_hits += record.cache_hit
        self.stats.errors += record.error is not None
        self.stats.parse_failures += record.parse_error is not None
        self.stats.input_tokens += record.input_tokens or 0
        self.stats.output_tokens += record.output_tokens or 0

    def _progress(self) -> Progress:
        return Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn(
                "cached {task.fields[hits]} · failed {task.fields[failed]} · unparsable {task.fields[bad]}"
            ),
            TimeRemainingColumn(),
            console=self.console,
            disable=not self.show_progress,
        )

    def _aggregate(
        self, dataset: Dataset, records: list[Record], predictions_file: Path | None = None
    ) -> Aggregate:
        predictions = predictions_from_records(records)
        if predictions_file is not None:
            write_predictions(predictions_file, predictions, dataset.items)
        matrices = [
            build_matrix(dataset.items, predictions.get(repeat, {}))
            for repeat in range(self.config.repeats)
        ]
        return aggregate(
            matrices,
            missing=self.config.missing,
            n_bootstrap=self.config.n_bootstrap,
            seed=self.config.seed,
        )

    def _finish(self, dataset: Dataset, records: list[Record], started: float) -> RunResult:
        result_aggregate = self._aggregate(dataset, records, self.out_dir / "predictions.jsonl")
        self.stats.wall_s = round(time.perf_counter() - started, 3)
        metrics = result_aggregate.to_json()
        metrics["parse_failures"] = self.stats.parse_failures
        metrics["errors"] = self.stats.errors
        if self.variant is not None and self.variant.mode == "joint":
            metrics["position_top1"] = position_top1_rates(records, dataset.items)
        expected = with_expected_scores(records)
        if expected is not None:
            metrics["expected_score"] = self._aggregate(dataset, expected).to_json()
        (self.out_dir / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
        stats = self.stats.to_json()
        if isinstance(self.provider, Judge):
            stats["cost"] = run_cost(self.config.provider, self.provider.model, records)
        summaries = self.summaries
        if summaries.records and summaries.provider and summaries.model:
            stats["summaries_cost"] = run_cost(
                summaries.provider, summaries.model, summaries.records
            )
        (self.out_dir / "run.json").write_text(json.dumps(stats, indent=2) + "\n")
        (self.out_dir / "config.yaml").write_text(
            yaml.safe_dump(self.config.model_dump(mode="json"), sort_keys=False)
        )
        result = RunResult(self.config, self.out_dir, self.stats, result_aggregate)
        write_run_report(result.out_dir / "report.md", self.config, metrics, stats)
        return result


def with_expected_scores(records: list[Record]) -> list[Record] | None:
    """The records with each parsed pointwise score replaced by the judge's probability-
    weighted score (`extra.expected_score`, local judges with `expected_score: true`), for
    the second metrics block; None when no record carries one. An answer that failed to
    parse stays missing; one whose score start was not found keeps its greedy score."""
    swapped, found = [], False
    for record in records:
        value = record.extra.get("expected_score")
        if value is not None and len(record.candidates) == 1:
            (cid,) = record.candidates
            if record.scores.get(cid) is not None:
                record = record.model_copy(update={"scores": {cid: float(value)}})
                found = True
        swapped.append(record)
    return swapped if found else None


def run_experiment(config: ExperimentConfig, **kwargs: Any) -> RunResult:
    return asyncio.run(Runner(config, **kwargs).run())
