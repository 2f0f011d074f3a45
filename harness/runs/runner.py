"""The one runner: prepares every call of an experiment, answers it from the cache or the
provider (with bounded concurrency, rate limit and retries), parses, streams records and
writes the run's metrics and report."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from harness.calls.answerer import Answerer
from harness.calls.batch_ledger import LEDGER_NAME
from harness.calls.cache import ResponseCache
from harness.calls.portable_cache import write_run_keys
from harness.calls.pricing import RunCost, run_cost
from harness.calls.stats import RunStats
from harness.config.experiment import ExperimentConfig
from harness.config.protocols import get_protocol, resolve
from harness.core.console import RunProgress, terminal
from harness.core.dataset import Dataset, Item, load_dataset
from harness.core.errors import DatasetError, StorageError
from harness.core.locking import RunFolderLock
from harness.core.provenance import now, provenance, unofficial_endpoints
from harness.core.records import Record, RecordsFile, RecordWriter, scan_partial, sort_records
from harness.core.sanitize import terminal_text
from harness.core.secrets import scrub_value
from harness.core.sharding import Shard
from harness.interop.hf import materialize, read_source
from harness.protocols import call_plan
from harness.protocols.call_window import run_in_window
from harness.protocols.plans import Call, CallPlan, check_inputs
from harness.protocols.summaries import Summaries
from harness.runs.run_folder import check_run_folder, evaluate_items, evaluate_run, write_run_folder
from harness.scoring.evaluation import Evaluation, no_scores_reason
from harness.scoring.metrics import Aggregate
from providers import Judge, Provider, create_provider

# Calls started ahead of their answers (`Runner.in_flight_limit`).
IN_FLIGHT_PER_SLOT = 4
IN_FLIGHT_MIN = 256


@dataclass
class RunResult:
    config: ExperimentConfig
    out_dir: Path
    stats: RunStats
    aggregate: Aggregate
    human: Aggregate | None = None  # the human ceiling, when the items carry annotations
    groups: dict[str, Aggregate] = field(default_factory=dict)  # per item group
    unofficial: list[str] = field(default_factory=list)  # API endpoints not official
    protocol: dict[str, Any] = field(default_factory=dict)  # the protocol's metrics blocks

    @property
    def complete(self) -> bool:
        return self.stats.errors == 0

    def metrics_json(self) -> dict[str, Any]:
        """The metrics as in metrics.json (without the run's counts), `groups` included."""
        out = self.aggregate.to_json()
        if self.groups:
            out["groups"] = {name: agg.to_json() for name, agg in self.groups.items()}
        return out | self.protocol

    @property
    def no_scores(self) -> str | None:
        """Why the run has no usable score at all (its metrics would be chance level)."""
        return no_scores_reason(self.aggregate.to_json(), self.stats.to_json())


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
        overwrite: bool = False,
        items: Sequence[str] | None = None,
        shard: Shard | None = None,
    ) -> None:
        self.config = config
        self.items = None if items is None else set(items)  # only these (config.yaml `items`)
        self.overwrite = overwrite
        self.cache = cache
        self.shard = shard  # `--shard I/N`: only the items of that shard, in its own folder
        self.out_dir = run_folder(results_dir, config, shard)
        self.provider = provider or create_provider(config.provider)
        self.console = console or terminal(stderr=True)
        self.show_progress = show_progress
        self.started_at = now()
        self.stats = RunStats()
        self.answerer = Answerer(self.provider, config.provider, cache, self.stats)
        batch_api = self.provider.batch_api() if isinstance(self.provider, Judge) else None
        if batch_api is not None:
            self.answerer.use_batches(batch_api, self.out_dir / LEDGER_NAME, self.console)
        self.plan: CallPlan = call_plan(config, self.provider, self.out_dir)
        self.summaries = Summaries(self.out_dir / "summaries.jsonl")

    def whole_dataset(self) -> Dataset:
        """The run's items before sharding (`limit` and `items` applied)."""
        dataset = run_dataset(self.config)
        if self.items is not None:
            dataset = dataset.subset([i.id for i in dataset.items if i.id in self.items])
        return dataset

    def dataset(self) -> Dataset:
        """The items this run evaluates: the whole dataset's, or its shard's."""
        whole = self.whole_dataset()
        return whole if self.shard is None else self.shard.select(whole)

    def summary_of(self, item: Item) -> str | None:
        """The item's summary, or the one generated for it by `prepare_summaries`."""
        if self.config.inputs.dialogue != "summary":
            return None
        return self.summaries.get(item)

    async def prepare_summaries(self, dataset: Dataset) -> None:
        """Generate (or take from the cache) the summaries that items and examples lack."""
        if self.config.inputs.dialogue != "summary":
            return
        evaluated = [(item, Path(self.config.dataset)) for item in dataset.items]
        examples = [(e.item, e.source) for e in self.plan.examples(dataset)]
        await self.summaries.ensure(
            evaluated + examples,
            config=self.config,
            answerer=self.answerer,
            console=self.console,
            show_progress=self.show_progress,
        )

    async def prepare_plan(self, dataset: Dataset) -> None:
        """Refuse inputs the items lack, then do what the plan needs before its calls."""
        check_inputs(self.config, dataset, self.provider.kind)
        await self.plan.prepare(dataset, self.cache, self.summary_of)

    def prepare(self, dataset: Dataset) -> list[Call]:
        return list(self.iter_calls(dataset))

    def iter_calls(self, dataset: Dataset) -> Iterator[Call]:
        return self.plan.calls(dataset, self.summary_of)

    async def run_call(self, call: Call) -> list[Record]:
        """The call's records: one, or a conversation's turns (`protocol: refine`)."""
        return await self.plan.records(call, self.answerer)

    async def run(self) -> RunResult:
        started = time.perf_counter()
        self.started_at = now()
        check_run_folder(self.out_dir, self.config, overwrite=self.overwrite)
        whole = self.whole_dataset()
        dataset = whole if self.shard is None else self.shard.select(whole)
        check_inputs(self.config, dataset, self.provider.kind)
        self.check_metrics_step(dataset)
        self.dataset_sha256 = dataset.content_sha256(audio=self.config.sends_audio)
        lock = RunFolderLock(self.out_dir).acquire()  # a second process is refused
        finished = False
        try:
            if self.shard is not None:
                self.shard.write_marker(self.out_dir, whole, dataset, self.dataset_sha256)
            result = await self._run_locked(dataset, started)
            finished = True
            return result
        finally:
            lock.release(failed=not finished)

    def check_metrics_step(self, dataset: Dataset) -> None:
        """Evaluate placeholder scores before any call: what would fail at the metrics step
        fails before anything is paid."""
        placeholder = (
            Record(
                item_id=item.id,
                candidates=list(item.candidates),
                repeat=repeat,
                scores=dict.fromkeys(item.candidates, 0.0),
            )
            for repeat in range(self.config.repeats)
            for item in dataset.items
        )
        # Two resamples take the bootstrap's path; the run's thousand would only cost time.
        config = self.config.model_copy(update={"n_bootstrap": 2})
        if get_protocol(self.config.protocol).evaluate is None:  # its own scoring needs no gold
            dataset.check_judged()
        try:
            evaluate_items(config, dataset.items, placeholder)
        except (ArithmeticError, LookupError, TypeError, ValueError) as exc:
            raise DatasetError(
                Path(self.config.dataset) / "items.jsonl",
                None,
                f"the run could not be evaluated, so nothing was sent: {exc}",
            ) from None

    async def _run_locked(self, dataset: Dataset, started: float) -> RunResult:
        damaged_before, seeded_before = len(self.cache.damaged), self.cache.seeded
        self.cache.used = set()  # the answers this run uses: cache_keys.txt
        await self.prepare_summaries(dataset)
        await self.plan.prepare(dataset, self.cache, self.summary_of)
        calls = self.iter_calls(dataset)
        first = next(calls, None)  # set-up and template errors stop the run before any call
        records_path = self.out_dir / "records.jsonl"
        # Streamed to a partial file and renamed when complete (one found: a killed run).
        partial = records_path.with_name("records.partial.jsonl")
        self._report_interrupted(partial)
        writer = RecordWriter(partial)
        try:
            show = self.show_progress
            with RunProgress(self.config.name, self.console, show=show) as progress:
                stats = self.stats

                async def one(call: Call) -> None:
                    for record in await self.run_call(call):
                        writer.write(record)  # and not kept: memory stays flat
                        self._count(record)
                    progress.done(stats.cache_hits, stats.errors, stats.parse_failures)

                everything = calls if first is None else itertools.chain([first], calls)
                await run_in_window(everything, one, progress.total, limit=self.in_flight_limit())
                progress.show(stats.cache_hits, stats.errors, stats.parse_failures)
        finally:
            writer.close()
            self.answerer.close()
            await self.plan.aclose()
            await self.provider.aclose()
        self.stats.cache_repaired = len(self.cache.damaged) - damaged_before
        self.stats.seeded = self.cache.seeded - seeded_before
        try:
            sort_records(partial, records_path, [item.id for item in dataset.items])
            result = self._finish(dataset, RecordsFile(records_path), started)
            write_run_keys(self.out_dir, self.cache.used)
            return result
        except OSError as exc:  # every answer is in the cache: a re-run rewrites these files
            raise StorageError(
                f"cannot write the results to {self.out_dir}: {exc.strerror or exc}"
            ) from None

    def in_flight_limit(self) -> int | None:
        """How many calls are started ahead of their answers (memory stays flat in the
        number of calls); None (all) in batch mode, where a batch collects every miss."""
        if self.answerer.batch is not None:
            return None
        return max(IN_FLIGHT_MIN, IN_FLIGHT_PER_SLOT * self.config.provider.max_concurrency)

    def _report_interrupted(self, partial: Path) -> None:
        if not partial.exists():
            return
        self.stats.resumed_records, self.stats.torn_lines = scan_partial(partial)
        torn = self.stats.torn_lines
        self.console.print(
            f"[yellow]resuming[/] {self.config.name}: an interrupted run left "
            f"{self.stats.resumed_records} complete record(s)"
            + (f" and {torn} half-written line(s), which are dropped" if torn else "")
            + f" in {terminal_text(partial)}; every answer it received comes back from the cache",
            highlight=False,
        )

    def _count(self, record: Record) -> None:
        self.stats.calls += 1
        self.stats.cache_hits += record.cache_hit
        self.stats.errors += record.error is not None
        self.stats.parse_failures += record.parse_error is not None
        self.stats.input_tokens += record.input_tokens or 0
        self.stats.output_tokens += record.output_tokens or 0

    def _finish(self, dataset: Dataset, records: Iterable[Record], started: float) -> RunResult:
        """Evaluate the run's records (pricing a judge's calls in the same pass), write its
        folder."""
        cost = None
        if self.provider.kind == "judge":
            cost = RunCost(self.config.provider, self.provider.model)
        evaluation, metrics = self.evaluate(dataset, records, cost)
        self.stats.wall_s = round(time.perf_counter() - started, 3)
        stats = self.run_stats(records, cost)
        human = write_run_folder(
            self.out_dir,
            self.config,
            items=dataset.items,
            evaluation=evaluation,
            metrics=metrics,
            stats=stats,
            subset=None if self.items is None else [item.id for item in dataset.items],
        )
        blocks = get_protocol(self.config.protocol).blocks
        return RunResult(
            self.config,
            self.out_dir,
            self.stats,
            evaluation.aggregate,
            human,
            evaluation.groups,
            unofficial_endpoints(stats),
            {k: metrics[k] for k in blocks if k in metrics},
        )

    def evaluate(
        self, dataset: Dataset, records: Iterable[Record], cost: RunCost | None = None
    ) -> tuple[Evaluation, dict[str, Any]]:
        """The run's evaluation and its metrics.json, the records' calls added to `cost`."""
        return evaluate_run(
            self.config,
            dataset,
            records,
            parse_failures=self.stats.parse_failures,
            errors=self.stats.errors,
            cost=cost,
        )

    def run_stats(self, records: Iterable[Record], cost: RunCost | None = None) -> dict[str, Any]:
        """run.json: the run's counts, the plan's, the cost (`cost` when added up already)
        and the provenance, scrubbed (a key in a base URL, a model name that is the key)."""
        stats = self.stats.to_json() | self.plan.extra_stats()
        stats["dataset_sha256"] = self.dataset_sha256
        templates = self.plan.template_hash.used | self.answerer.template_hash.used
        if templates:
            stats["templates"] = templates
        if self.provider.kind == "judge":
            stats["cost"] = (
                cost.summary()
                if cost is not None
                else run_cost(self.config.provider, self.provider.model, records)
            )
        summaries = self.summaries
        if summaries.records and summaries.provider and summaries.model:
            stats["summaries_cost"] = run_cost(
                summaries.provider, summaries.model, summaries.records
            )
        stats["provenance"] = provenance(
            started_at=self.started_at,
            endpoints={"provider": self.provider.endpoint(), "summarizer": summaries.endpoint},
            dataset=read_source(self.config.dataset),
        )
        return scrub_value(stats)  # type: ignore[no-any-return]


def run_dataset(config: ExperimentConfig) -> Dataset:
    """The items a run evaluates, before sharding: the dataset's (or those a protocol of its
    own dataset form makes of it), or their first `limit`."""
    protocol = get_protocol(config.protocol)
    if config.hf_source is not None:  # written once, then read as a folder
        materialize(config.hf_source, config.dataset, rows=protocol.dataset_file)
    if protocol.dataset is not None:
        own = resolve(protocol.dataset)
        dataset: Dataset = own(config.own_options(), config.dataset, seed=config.seed)
    else:
        dataset = load_dataset(config.dataset)
    if config.limit:
        dataset = dataset.subset([i.id for i in dataset.items[: config.limit]])
    return dataset


def run_folder(results_dir: Path, config: ExperimentConfig, shard: Shard | None = None) -> Path:
    """Where a run (or one shard of it) writes its records, metrics and report."""
    if shard is None:
        return results_dir / config.results_subdir
    return shard.folder(results_dir, config.results_subdir)
