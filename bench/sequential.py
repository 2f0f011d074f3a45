"""(9) The sequential comparison on synthetic items (`harness compare --sequential`'s engine):
2,000 items of 4 candidates with one gold each; per seed, A puts the gold first on each item
with probability 0.30 and B with 0.45 (independently: the hardest case, no shared easy
items), or both with 0.30. Hit@1 per item comes from the one evaluation path, the comparison
from `harness.runs.compare.engine.sequential_compare` with its defaults (alpha 0.05, batches of
50, items as i.i.d. draws). Goal: with the 0.15 difference, "B better" in >= 95% of seeds
using <= 30% of the items (median); with none, a decision in <= 5% of seeds.

The power table (`python -m bench.sequential --power`, written to bench/sequential_power.json):
both designs of `harness compare`, the sequential one and the fixed-size paired test on all
2,000 items, at B - A = +0.15, +0.10, +0.05 and 0, and the sequential one with `--finite` at 0;
per-item Hit@1 drawn directly (a judge without ties puts the gold first or not).

Seeded, so the figures do not depend on the machine; docs/sequential.md shows them and
tests/bench/test_sequential.py checks them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import BenchResult, Size
from harness.core.dataset import Item, Turn
from harness.core.records import Record
from harness.runs.compare.engine import fixed_compare, sequential_compare
from harness.runs.compare.result import Comparison
from harness.runs.compare.sources import ValuesSource, per_item_metric

N_ITEMS, CANDIDATES, BASE_HIT, EFFECT = 2000, 4, 0.30, 0.15
GOAL_POWER, GOAL_FRACTION, GOAL_FALSE = 0.95, 0.30, 0.05
SEEDS = {"tiny": 2, "full": 100}
LETTER = {"B better": "B", "A better": "A", "equivalent": "E", "undecided": "U"}
SEEDS_FILE = Path(__file__).with_name("sequential_seeds.json")
_TURN = (Turn(speaker="A", text="play something"),)


def synthetic_items(n: int = N_ITEMS) -> list[Item]:
    candidates = tuple(f"c{j}" for j in range(CANDIDATES))
    return [
        Item(id=f"i{i:05d}", dialogue=_TURN, candidates=candidates, relevant=("c0",))
        for i in range(n)
    ]


def synthetic_records(items: list[Item], hit_rate: float, rng: np.random.Generator) -> list[Record]:
    """One answer per item: the gold scored highest with probability `hit_rate`, else one
    of the other candidates (no ties, so Hit@1 is 0 or 1)."""
    records = []
    for item in items:
        scores = rng.permutation(len(item.candidates)).astype(float)  # distinct 0..3
        top = int(np.argmax(scores))
        gold = 0
        if rng.random() < hit_rate:
            scores[[gold, top]] = scores[[top, gold]]
        elif top == gold:
            other = int(rng.integers(1, len(item.candidates)))
            scores[[gold, other]] = scores[[other, gold]]
        records.append(
            Record(
                item_id=item.id,
                candidates=list(item.candidates),
                scores=dict(zip(item.candidates, scores.tolist(), strict=True)),
            )
        )
    return records


def one_comparison(
    seed: int, effect: float, *, items: list[Item] | None = None, **options: Any
) -> Comparison:
    items = items if items is not None else synthetic_items()
    rng = np.random.default_rng([seed, round(effect * 1000)])
    a = per_item_metric(items, synthetic_records(items, BASE_HIT, rng), "hit@1", repeats=1)
    b = per_item_metric(items, synthetic_records(items, BASE_HIT + effect, rng), "hit@1", repeats=1)
    return sequential_compare(ValuesSource(a, b), seed=seed, **options)


@dataclass(frozen=True)
class Summary:
    seeds: int
    b_better: float  # share of seeds deciding "B better"
    decided: float  # share deciding anything
    median_fraction: float  # median share of the items visited
    max_fraction: float

    def to_json(self) -> dict[str, float]:
        return {k: round(float(v), 4) for k, v in self.__dict__.items()}


def seed_outcomes(seeds: int, effect: float, **options: Any) -> dict[str, Any]:
    """Per seed, the decision (a letter of LETTER) and the number of items visited."""
    items = synthetic_items()
    runs = [one_comparison(seed, effect, items=items, **options) for seed in range(seeds)]
    decisions = "".join(LETTER[r.decision] for r in runs)
    return {"effect": effect, "decisions": decisions, "visited": [r.n_items for r in runs]}


def summarise(outcomes: dict[str, Any]) -> Summary:
    fractions = np.array(outcomes["visited"]) / N_ITEMS
    letters = outcomes["decisions"]
    return Summary(
        seeds=len(letters),
        b_better=letters.count("B") / len(letters),
        decided=(len(letters) - letters.count("U")) / len(letters),
        median_fraction=float(np.median(fractions)),
        max_fraction=float(fractions.max()),
    )


def simulate(seeds: int, effect: float, **options: Any) -> Summary:
    return summarise(seed_outcomes(seeds, effect, **options))


def docs_rows(better: Summary, equal: Summary) -> list[str]:
    """The rows of docs/sequential.md's table (tests/bench/test_sequential.py checks them)."""
    return [
        f"| {label} | {s.seeds:.0f} | {s.b_better:.0%} | {s.decided:.0%} | "
        f"{s.median_fraction:.1%} | {s.max_fraction:.1%} |"
        for label, s in (("B's Hit@1 0.15 above A's", better), ("equal Hit@1", equal))
    ]


def run(size: Size, work: Path) -> BenchResult:
    seeds = SEEDS.get(size, SEEDS["full"])
    better = simulate(seeds, EFFECT)
    equal = simulate(seeds, 0.0)
    met = (
        better.b_better >= GOAL_POWER
        and better.median_fraction <= GOAL_FRACTION
        and equal.decided <= GOAL_FALSE
    )
    return BenchResult(
        name="sequential",
        summary=(
            f"{seeds} seeds, 2,000 items: Hit@1 +0.15 -> 'B better' in {better.b_better:.0%}, "
            f"median {better.median_fraction:.1%} of the items (max {better.max_fraction:.1%}); "
            f"equal Hit@1 -> decided in {equal.decided:.0%}"
        ),
        figures={
            **{f"effect_0.15_{k}": v for k, v in better.to_json().items()},
            **{f"equal_{k}": v for k, v in equal.to_json().items()},
        },
        notes=docs_rows(better, equal),
        goal=">= 95% 'B better' on <= 30% of items (median); <= 5% decided when equal",
        met=met,
    )


POWER_EFFECTS = (0.15, 0.10, 0.05, 0.0)
POWER_SEEDS = 200
POWER_FILE = Path(__file__).with_name("sequential_power.json")


def hit_values(rate: float, rng: np.random.Generator) -> dict[str, float]:
    """Per-item Hit@1 of a judge putting the one gold first with probability `rate`."""
    return {f"i{i:05d}": float(hit) for i, hit in enumerate(rng.random(N_ITEMS) < rate)}


def power_row(effect: float, seeds: range, *, finite: bool = False) -> dict[str, Any]:
    """Per seed, the sequential comparison's decision (a letter of LETTER) and items visited,
    and (not `finite`) the fixed-size test's decision."""
    sequential, visited, fixed = "", [], ""
    for seed in seeds:
        rng = np.random.default_rng([seed, round(effect * 1000)])
        source = ValuesSource(hit_values(BASE_HIT, rng), hit_values(BASE_HIT + effect, rng))
        found = sequential_compare(source, seed=seed, finite=finite)
        sequential += LETTER[found.decision]
        visited.append(found.n_items)
        if not finite:
            fixed += LETTER[fixed_compare(source, seed=seed).decision]
    return {"effect": effect, "finite": finite, "sequential": sequential, "visited": visited} | (
        {} if finite else {"fixed": fixed}
    )


def power(seeds: range = range(POWER_SEEDS)) -> list[dict[str, Any]]:
    rows = [power_row(effect, seeds) for effect in POWER_EFFECTS]
    return [*rows, power_row(0.0, seeds, finite=True)]


def power_table(rows: list[dict[str, Any]]) -> str:
    """docs/sequential.md's table of `power()`'s rows: the share of seeds declaring a winner
    (where B is better, "B better"; where they are equal, either), and the median share of
    the items the sequential comparison visited."""

    def won(letters: str, effect: float) -> str:
        wins = letters.count("B") + (letters.count("A") if effect == 0 else 0)
        return f"{wins / len(letters):.1%}"

    lines = [
        f"| B - A (Hit@1; A at {BASE_HIT:.2f}) | seeds | sequential: a winner declared "
        f"| sequential: median share of the {N_ITEMS:,} items | fixed-size test on all "
        f"{N_ITEMS:,}: a winner declared |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        effect, letters = row["effect"], row["sequential"]
        label = f"{effect:+.2f}" if effect else "0" + (", `--finite`" if row["finite"] else "")
        fixed = won(row["fixed"], effect) if "fixed" in row else "n/a"
        share = float(np.median(row["visited"])) / N_ITEMS
        lines.append(
            f"| {label} | {len(letters)} | {won(letters, effect)} | {share:.1%} | {fixed} |"
        )
    return "\n".join(lines)


def example_figure(path: Path, seed: int = 0) -> Path:
    """docs/sequential.png: one seed of the +0.15 simulation, as compare.png draws it."""
    from harness.runs.compare.figure import plot_sequence

    return plot_sequence(one_comparison(seed, EFFECT), path)


if __name__ == "__main__":  # python -m bench.sequential [docs/sequential.png | --seeds | --power]
    import json
    import sys

    if sys.argv[1:] == ["--seeds"]:  # the 100 seeds of docs/sequential.md's first table
        outcomes = [seed_outcomes(SEEDS["full"], effect) for effect in (EFFECT, 0.0)]
        SEEDS_FILE.write_text("[\n" + ",\n".join(json.dumps(o) for o in outcomes) + "\n]\n")
        print("\n".join(docs_rows(*(summarise(o) for o in outcomes))))
    elif sys.argv[1:] == ["--power"]:
        rows = power()  # one row a line
        POWER_FILE.write_text("[\n" + ",\n".join(json.dumps(row) for row in rows) + "\n]\n")
        print(power_table(json.loads(POWER_FILE.read_text())))
    else:
        print(example_figure(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/sequential.png")))
