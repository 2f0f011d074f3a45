"""Write the sample set's illustrative `annotations` (three rankings per dialogue).

Usage::

    python data/sample/make_annotations.py [--check]

The sample set has one ranking per dialogue, the authors' (`human_ranking`); it has no pool
of annotators. So that the human-ceiling row of the reports has something to show, each
item gets three rankings, `a1`, `a2` and `a3`: `a1` is the authors' ranking, and `a2` and
`a3` each swap one pair of neighbours in it (a seeded choice per item), with the condition
that the Borda consensus of the three (`harness.scoring.consensus`) is the authors' ranking again,
so `human_ranking` stays what it was. They are not real annotators and say nothing about how
much people agree on these dialogues. `--check` verifies that items.jsonl holds exactly
what this script writes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from pathlib import Path
from typing import Any

from harness.scoring.consensus import consensus

ITEMS = Path(__file__).resolve().parent / "items.jsonl"
ANNOTATORS = ["a1", "a2", "a3"]


def swapped(ranking: list[str], position: int) -> list[str]:
    out = list(ranking)
    out[position], out[position + 1] = out[position + 1], out[position]
    return out


def annotations(item: dict[str, Any]) -> list[list[str]]:
    """The three rankings of one item (seeded by its id)."""
    ranking = list(item["human_ranking"])
    seed = int.from_bytes(hashlib.sha256(item["id"].encode()).digest()[:8], "big")
    rng = random.Random(seed)
    pairs = range(len(ranking) - 1)
    while True:
        first, second = rng.choice(pairs), rng.choice(pairs)
        rankings = [ranking, swapped(ranking, first), swapped(ranking, second)]
        if consensus(rankings, item["candidates"]) == ranking:
            return rankings


def with_annotations(item: dict[str, Any]) -> dict[str, Any]:
    return {**item, "annotations": annotations(item), "annotators": ANNOTATORS}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="verify items.jsonl, write nothing")
    args = parser.parse_args(argv)
    items = [json.loads(line) for line in ITEMS.read_text(encoding="utf-8").splitlines() if line]
    text = "".join(json.dumps(with_annotations(i), ensure_ascii=False) + "\n" for i in items)
    if args.check:
        same = text == ITEMS.read_text(encoding="utf-8")
        print(f"make_annotations: items.jsonl {'matches' if same else 'differs from'} the script")
        return 0 if same else 1
    ITEMS.write_text(text, encoding="utf-8")
    print(f"make_annotations: wrote annotations for {len(items)} items to {ITEMS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
