"""The practical floor: the same chat requests sent with the bare `openai` SDK and
`asyncio.gather` under a semaphore, nothing else (no cache, no records, no retries). The
request body is the one `openai-compatible` sends: system message, user content of text and
base64 WAV `input_audio` parts, temperature 0, the variant's JSON schema as response_format.

Each request reads its clip and base64-encodes it when it is sent, as any client must
for distinct clips. Prints one JSON line: requests, answered, errors, in-process wall and CPU time.

    python -m bench.floor_openai REQUESTS.jsonl --base-url http://127.0.0.1:8765/v1 \
        --concurrency 64
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import time
from pathlib import Path
from typing import Any

from openai import AsyncOpenAI


def messages_of(request: dict[str, Any]) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    for part in request["parts"]:
        if "text" in part:
            content.append({"type": "text", "text": part["text"]})
        else:
            data = base64.b64encode(Path(part["audio"]).read_bytes()).decode("ascii")
            content.append({"type": "input_audio", "input_audio": {"data": data, "format": "wav"}})
    return [
        {"role": "system", "content": request["system"]},
        {"role": "user", "content": content},
    ]


def body_of(request: dict[str, Any], model: str) -> dict[str, Any]:
    schema = {"name": "answer", "schema": request["response_schema"]}
    return {
        "model": model,
        "messages": messages_of(request),
        "temperature": 0.0,
        "response_format": {"type": "json_schema", "json_schema": schema},
    }


async def send_all(
    requests: list[dict[str, Any]], base_url: str, model: str, concurrency: int
) -> dict[str, Any]:
    client = AsyncOpenAI(base_url=base_url, api_key="bench-key", max_retries=0)
    semaphore = asyncio.Semaphore(concurrency)
    errors: list[str] = []

    async def one(request: dict[str, Any]) -> float | None:
        async with semaphore:
            try:
                response = await client.chat.completions.create(**body_of(request, model))
            except Exception as exc:  # the floor counts failures; it does not retry them
                errors.append(type(exc).__name__)
                return None
        score: float = json.loads(response.choices[0].message.content or "{}")["score"]
        return score

    started, cpu = time.perf_counter(), time.process_time()
    scores = await asyncio.gather(*(one(r) for r in requests))
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    await client.close()
    return {
        "requests": len(requests),
        "answered": sum(s is not None for s in scores),
        "errors": len(errors),
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.floor_openai", description=__doc__)
    parser.add_argument("requests", type=Path, help="JSONL of {system, parts} per request")
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", default="bench-model")
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args(argv)
    with args.requests.open() as handle:
        requests = [json.loads(line) for line in handle]
    summary = asyncio.run(send_all(requests, args.base_url, args.model, args.concurrency))
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
