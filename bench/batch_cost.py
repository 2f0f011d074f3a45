"""(8) What batch mode and prompt caching save on a full DialBGM configuration: 1,200 items x
4 candidates with audio, pointwise (`zero_shot`, 4,800 calls), joint (1,200 calls) and
pointwise again with dialogues about 1,200 tokens longer (`zero_shot_long`: past the minimum
prefix that prompt caching serves), on
Gemini 2.5 Flash through google-genai against the fake server (which reports prompt-prefix
cache hits the way OpenAI describes them: prompts of 1,024 tokens or more, whole blocks of 128
tokens). Costs are the harness's own estimates from the price table and the token counts the
fake reports, as written to run.json; the wall time is the batch round trip (submit, poll,
download) against a fake that finishes a job at once, next to the same run online."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from bench.common import (
    BenchResult,
    DatasetSpec,
    Size,
    fake_server,
    harness_run,
    ratio,
    reset_server,
    synth_dataset,
    write_experiment,
)

SPECS = {"full": DatasetSpec(1200, 4800, 1.0), "tiny": DatasetSpec(6, 24, 0.2)}
MODEL = "gemini-2.5-flash"
PROMPTS = ("zero_shot", "joint", "zero_shot_long")
LONG_TURN = "and then we talked it all through again, every detail of the plan, slowly " * 60


def long_dialogues(dataset: Path, work: Path) -> Path:
    """A copy of the dataset whose dialogues run to about 1,200 more tokens (a long
    conversation history), so that an item's four requests share a prefix past the
    1,024-token minimum of prompt caching."""
    folder = work / "long_dialogues"
    if folder.exists():
        shutil.rmtree(folder)
    shutil.copytree(dataset, folder, ignore=shutil.ignore_patterns("audio"))
    (folder / "audio").symlink_to((dataset / "audio").resolve())
    items = [json.loads(line) for line in (folder / "items.jsonl").read_text().splitlines()]
    for item in items:
        item["dialogue"].insert(0, {"speaker": "A", "text": f"{item['id']}: {LONG_TURN}"})
    (folder / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    return folder


def _provider(base: str, batch: bool) -> dict[str, Any]:
    provider: dict[str, Any] = {
        "name": "gemini",
        "model": MODEL,
        "base_url": base,
        "max_concurrency": 64,
        "max_attempts": 20,
    }
    if batch:
        provider.update(batch=True, batch_poll_s=0.2, batch_collect_s=0.5)
    return provider


def run(size: Size, work: Path) -> BenchResult:
    dataset = synth_dataset(SPECS[size])
    longer = long_dialogues(dataset, work)
    figures: dict[str, Any] = {"model": MODEL, "items": SPECS[size].n_items}
    with fake_server(latency=0.0, extra=["--prefix-cache"]) as base:
        for prompt in PROMPTS:
            for mode in ("online", "batch"):
                reset_server(base)  # every run starts with the provider's prefix cache empty
                name = f"{prompt}_{mode}"
                experiment = write_experiment(
                    work / f"{name}.yaml",
                    name=name,
                    dataset=longer if prompt.endswith("_long") else dataset,
                    provider=_provider(base, batch=mode == "batch"),
                    prompt=prompt.removesuffix("_long"),
                    n_bootstrap=100,
                )
                timed, stats = harness_run(experiment, work, cache=work / f"cache_{name}")
                cost = stats["cost"]
                if stats["errors"] or cost["usd"] is None:
                    raise RuntimeError(f"{name}: {stats['errors']} errors, cost {cost}")
                figures[f"{name}: calls"] = stats["calls"]
                figures[f"{name}: input tokens"] = cost["usage"]["input_tokens"]
                figures[f"{name}: cached input tokens"] = cost["usage"]["cached_input_tokens"]
                figures[f"{name}: online, no prompt cache (USD)"] = cost["usd_online"]
                figures[f"{name}: prompt-cache discount (USD)"] = cost["cache_discount"]
                figures[f"{name}: batch discount (USD)"] = cost["batch_discount"]
                figures[f"{name}: cost (USD)"] = cost["usd"]
                figures[f"{name}: process wall (s)"] = round(timed.wall_s, 2)
                if mode == "batch":
                    figures[f"{prompt}: batch jobs"] = stats["batch"]["batches"]
    summary = []
    for prompt in PROMPTS:
        online = figures[f"{prompt}_online: online, no prompt cache (USD)"]
        cached = figures[f"{prompt}_online: cost (USD)"]
        batch = figures[f"{prompt}_batch: cost (USD)"]
        figures[f"{prompt}: batch/online cost"] = ratio(batch, online)
        figures[f"{prompt}: prefix-cached/online cost"] = ratio(cached, online)
        figures[f"{prompt}: batch/online wall"] = ratio(
            figures[f"{prompt}_batch: process wall (s)"],
            figures[f"{prompt}_online: process wall (s)"],
        )
        summary.append(
            f"{prompt} ${online:.2f} online, ${cached:.2f} with prefix caching, "
            f"${batch:.2f} batch ({figures[f'{prompt}_batch: process wall (s)']:.0f} s round "
            f"trip vs {figures[f'{prompt}_online: process wall (s)']:.0f} s online)"
        )
    return BenchResult(
        name="batch_cost",
        summary=f"{MODEL}, {SPECS[size].n_items} items x 4 with audio: " + "; ".join(summary),
        figures=figures,
        goal="batch/online cost <= 0.5",
        met=all(figures[f"{p}: batch/online cost"] <= 0.5 + 1e-9 for p in PROMPTS),
    )
