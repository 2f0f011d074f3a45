"""No machine timing in a docstring or comment of harness/ or providers/: a figure measured on
one machine goes stale with the next change or machine. Speed and memory are measured in
bench/ (as ratios side by side), and a comment says why the code is as it is, not how fast
it ran. A duration that is data (a 10 s clip, a 20 ms Opus frame, a 2 s timeout) is not a
timing; a cost measured in time or as a fraction of a run's time is."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# A measured amount of time: "~0.4 s", "30 ms", "1.3 ms of 5.5 ms", "2 seconds"
_DURATION = re.compile(r"(?<![\w.])~?\d[\d,.]*\s?(?:ns|µs|us|ms|s|secs?|seconds?|minutes?|min)\b")
# ... said to be what something costs or takes when it runs
_COST = re.compile(
    r"\b(?:costs?|costing|took|takes|taking|faster|slower|CPU|start-up|startup|wall)\b",
    re.IGNORECASE,
)
# A speed-up or a share of the time: "15x faster", "three times faster", "a tenth of its time"
_RELATIVE = re.compile(
    r"\b(?:\d[\d.]*x|\w+ times) (?:faster|slower|the time|the cost|the CPU)\b"
    r"|\b(?:a|one) (?:half|third|quarter|fifth|sixth|tenth|twentieth|fortieth|hundredth) of"
    r" (?:its|the|a|their)(?: \w+)? (?:time|cost|CPU|start-up|startup|render|call|read)\b"
    r"|\b(?:was|is|cost|costs|took|takes) (?:a|one) (?:half|third|quarter|fifth|sixth|tenth"
    r"|twentieth|fortieth) of\b",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"(?<=[.;!?])\s+|\n\s*\n")


def timings(text: str) -> list[str]:
    """The sentences of `text` (a docstring or a comment) that quote a machine timing."""
    flat = " ".join(text.split())
    return [
        sentence
        for sentence in _SENTENCE.split(flat)
        if (_DURATION.search(sentence) and _COST.search(sentence)) or _RELATIVE.search(sentence)
    ]


def texts(source: str) -> list[tuple[int, str]]:
    """(line, text) of every docstring and every comment block of `source`."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc is not None:
                found.append((node.body[0].lineno, doc))
    block: list[str] = []
    start = previous = 0
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT:
            continue
        line = token.start[0]
        if block and line != previous + 1:
            found.append((start, " ".join(block)))
            block = []
        if not block:
            start = line
        block.append(token.string.lstrip("#").strip())
        previous = line
    if block:
        found.append((start, " ".join(block)))
    return found


def test_the_check_tells_timings_from_durations_that_are_data() -> None:
    quoted = [
        "importlib.metadata costs ~0.8 s for the ~190 packages of the lock.",
        "The SDK's transform: 1.3 ms of 5.5 ms on the 2-core machine, a cost we skip.",
        "orjson writes the same bytes fifteen times faster for plain values.",
        "making one per answer was a quarter of parsing it",
        "the same values, in a tenth of its time",
        "Imported here: it takes 30 ms.",
    ]
    data = [
        "the extractor's window (10 s in the LAION checkpoints) is cut to its central window",
        "an Opus file's length to its 20 ms frame.",
        "a stalled request is given up after 2 s",
        "`~40 s`, `~12 min`, `~3.5 h`.",
        "tagging is costly on CPU, and the runs of a sweep meet the same clips again.",
        "OpenAI's Batch API: half the online price",
    ]
    assert all(timings(text) for text in quoted), [t for t in quoted if not timings(t)]
    assert not any(timings(text) for text in data), [t for t in data if timings(t)]


def test_no_docstring_or_comment_quotes_a_machine_timing() -> None:
    sources = sorted(
        p for folder in ("harness", "providers") for p in (ROOT / folder).rglob("*.py")
    )
    found = [
        f"{path.relative_to(ROOT)}:{line}: {sentence}"
        for path in sources
        for line, text in texts(path.read_text(encoding="utf-8"))
        for sentence in timings(text)
    ]
    assert sources and found == []
