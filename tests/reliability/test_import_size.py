"""D20: importing a MusiCRS thread of 100,000 candidates is linear: it took 44.6 s (list
membership per candidate, quadratic); the bound here is generous for a loaded machine."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from harness.core.dataset import load_dataset
from harness.interop.musicrs import import_musicrs

N = 100_000


@pytest.mark.slow
def test_d20_a_thread_of_100k_candidates_imports_in_linear_time(tmp_path: Path) -> None:
    titles = [f"Song number {i}" for i in range(N)]
    thread = {
        "name": "t3_big",
        "query": "What next?",
        "combined_text": "Thread: recommend me something.",
        "source_subreddit": "jazz",
        "final_candidates": titles + titles[:10],  # duplicates are counted and dropped
        "limited_gt": titles[::1000],
        "valid_urls": [],
    }
    source = tmp_path / "src.jsonl"
    source.write_text(json.dumps(thread) + "\n")
    started = time.perf_counter()
    summary = import_musicrs(source, tmp_path / "out")
    elapsed = time.perf_counter() - started
    assert summary.n_candidates == N and summary.n_duplicate_candidates == 10
    (item,) = load_dataset(tmp_path / "out", check_audio=False).items
    assert len(item.candidates) == N and len(item.relevant or ()) == N // 1000
    assert elapsed < 30.0, f"{elapsed:.1f} s"
