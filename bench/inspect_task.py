"""The benchmark workload as an inspect_ai task: the same rendered prompts and clips as the
harness sends, one sample per (item, candidate), solved with `generate()` through inspect's
OpenAI provider and scored by parsing the JSON score. Prints one JSON line.

    python -m bench.inspect_task REQUESTS.jsonl --base-url http://127.0.0.1:8765/v1 \
        --max-connections 64 --log-dir bench/out/inspect_logs
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from inspect_ai import Task, eval
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import (
    ChatMessage,
    ChatMessageSystem,
    ChatMessageUser,
    Content,
    ContentAudio,
    ContentText,
    ResponseSchema,
)
from inspect_ai.scorer import Score, Scorer, Target, mean, scorer
from inspect_ai.solver import TaskState, generate
from inspect_ai.util import JSONSchema


def sample_of(request: dict[str, Any]) -> Sample:
    content: list[Content] = [
        ContentText(text=part["text"])
        if "text" in part
        else ContentAudio(audio=part["audio"], format="wav")
        for part in request["parts"]
    ]
    messages: list[ChatMessage] = [
        ChatMessageSystem(content=request["system"]),
        ChatMessageUser(content=content),
    ]
    return Sample(id=request["id"], input=messages, target="")


@scorer(metrics=[mean()])
def json_score() -> Scorer:
    """The judge's {"score": x} as the sample's value (NaN when it does not parse)."""

    async def score(state: TaskState, target: Target) -> Score:
        try:
            value = float(json.loads(state.output.completion)["score"])
        except (ValueError, KeyError, TypeError):
            value = float("nan")
        return Score(value=value, answer=state.output.completion)

    return score


def bench_task(requests: list[dict[str, Any]]) -> Task:
    return Task(
        dataset=MemoryDataset([sample_of(r) for r in requests], name="bgm-bench"),
        solver=generate(),
        scorer=json_score(),
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.inspect_task", description=__doc__)
    parser.add_argument("requests", type=Path)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", default="bench-model")
    parser.add_argument("--max-connections", type=int, default=64)
    parser.add_argument("--log-dir", type=Path, required=True)
    args = parser.parse_args(argv)
    with args.requests.open() as handle:
        requests = [json.loads(line) for line in handle]
    # The variant's JSON schema as response_format, as the harness's openai-compatible sends.
    schema = requests[0]["response_schema"]
    response_schema = (
        ResponseSchema(name="answer", json_schema=JSONSchema.model_validate(schema))
        if schema
        else None
    )
    started = time.perf_counter()
    (log,) = eval(
        bench_task(requests),
        model=f"openai/{args.model}",
        model_base_url=args.base_url,
        # Chat Completions, as the harness uses (inspect would pick the Responses API here).
        model_args={"responses_api": False},
        max_connections=args.max_connections,
        temperature=0.0,
        response_schema=response_schema,
        log_dir=str(args.log_dir),
        display="none",
    )
    wall = time.perf_counter() - started
    samples = log.results.completed_samples if log.results else 0
    print(json.dumps({"status": log.status, "samples": samples, "wall_s": round(wall, 3)}))


if __name__ == "__main__":
    main()
