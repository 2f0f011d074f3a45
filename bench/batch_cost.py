"""(8) What batch mode and prompt caching save on a full DialBGM configuration: 1,200 items x
4 candidates with audio, pointwise (`zero_shot`, 4,800 calls) and joint (1,200 calls), on
Gemini 2.5 Flash through google-genai against the fake server (which reports prompt-prefix
cache hits the way OpenAI describes them: prompts of 1,024 tokens or more, whole blocks of 128
tokens). Costs are the harness's own estimates from the price table and the token counts the
fake reports, as written to run.json; the wall time is the batch round trip (submit, poll,
download) against a fake that finishes a job at once, next to the same run online."""

from __future__ import annotations

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
    figures: dict[str, Any] = {"model": MODEL, "items": SPECS[size].n_items}
    with fake_server(latency=0.0, extra=["--prefix-cache"]) as base:
        for prompt in ("zero_shot", "joint"):
            for mode in ("online", "batch"):
                reset_server(base)  # every run starts with the provider's prefix cache empty
                name = f"{prompt}_{mode}"
                experiment = write_experiment(
                    work / f"{name}.yaml",
                    name=name,
                    dataset=dataset,
                    provider=_provider(base, batch=mode == "batch"),
                    prompt=prompt,
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
    for prompt in ("zero_shot", "joint"):
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
        met=all(figures[f"{p}: batch/online cost"] <= 0.5 + 1e-9 for p in ("zero_shot", "joint")),
    )
