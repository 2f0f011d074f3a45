"""What a judge's answers were, counted from a run's records: how many prompts it answered
usably at once, how many needed a re-ask and what the re-ask gave, why the rest stayed
unusable, and how often it gave its most common answer. docs/real_judges.md's answers table
(`make docs`) and tests/providers/local/test_gguf.py read the same counts off the real
SmolLM2 run of experiments/real_judges.yaml."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from harness.core.records import Record


@dataclass(frozen=True)
class AnswerCounts:
    prompts: int  # distinct prompts (a greedy run's repeats are one prompt each)
    usable_at_once: int
    reasked: int
    usable_after_reask: int
    unusable: Counter[str]  # the parse error's reason ("not_json", ...) -> prompts
    answers: Counter[str]  # the usable answers' texts -> prompts

    def modal(self) -> tuple[str, int]:
        """The most common usable answer and how many prompts got it."""
        return self.answers.most_common(1)[0] if self.answers else ("", 0)


def answer_counts(records: Iterable[Record], *, sampled: bool) -> AnswerCounts:
    """The counts over distinct prompts: with `sampled` False, every repeat of a prompt
    is the same greedy answer (from the cache) and counts once."""
    prompts: dict[tuple[str, tuple[str, ...], int], Record] = {}
    for record in records:
        prompts[(record.item_id, tuple(record.candidates), record.repeat if sampled else 0)] = (
            record
        )
    usable = [r for r in prompts.values() if r.raw is not None and r.parse_error is None]
    reasked = [r for r in prompts.values() if r.attempts]
    return AnswerCounts(
        prompts=len(prompts),
        usable_at_once=sum(not r.attempts for r in usable),
        reasked=len(reasked),
        usable_after_reask=sum(bool(r.attempts) for r in usable),
        unusable=Counter(
            (r.parse_error or r.error or "?").split(":")[0]
            for r in prompts.values()
            if r.raw is None or r.parse_error is not None
        ),
        answers=Counter(r.raw for r in usable if r.raw is not None),
    )


def share(part: int, whole: int) -> str:
    return f"{part} of {whole} ({part / whole:.0%})" if whole else "0"


def counts_table(rows: Iterable[tuple[str, AnswerCounts]]) -> str:
    """A Markdown table of the counts, one row per run."""
    lines = [
        "| judge | prompts | usable at once | re-asked | usable after the re-ask | unusable | most common answer |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, counts in rows:
        modal, times = counts.modal()
        why = ", ".join(f"{n} {reason}" for reason, n in sorted(counts.unusable.items())) or "0"
        lines.append(
            f"| {label} | {counts.prompts} | {share(counts.usable_at_once, counts.prompts)} "
            f"| {counts.reasked} | {counts.usable_after_reask} | {why} "
            f"| {f'`{modal}`: {share(times, counts.prompts)}' if times else 'none'} |"
        )
    return "\n".join(lines)
