"""How good the descriptions of a `protocol: describe` run are, against a reference: the caption
of each item's most relevant candidate (the human's top clip; every gold item of a pool).

- `bleu_1` .. `bleu_4`: corpus BLEU with n-grams up to 1..4 (sacrebleu: 13a tokenisation,
  lower-cased, exponential smoothing, several references where several candidates share the
  top relevance), on a 0-1 scale (sacrebleu's score / 100). The CI resamples items and
  recomputes corpus BLEU from each item's n-gram statistics.
- `rouge_l`: ROUGE-L F-measure per item (rouge-score; the best over the references), mean.
- `embedding_cosine`: the cosine between description and reference in a text-embedding
  model, per item (recorded by the run as `extra.reference_cosine`), mean.

Each with a seeded 95% percentile-bootstrap CI over items; with repeats an item counts once
(its sentences pooled for BLEU, its values averaged otherwise).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any

import numpy as np

from harness.core.dataset import Clip, Dataset, Item
from harness.core.records import Record
from harness.scoring import registry
from harness.scoring.metrics import FloatArray, MetricSummary, resample_counts, summarize

BLEU_ORDERS = (1, 2, 3, 4)


def references_of(item: Item, clips: dict[str, Clip]) -> list[str]:
    """Captions (else titles) of the item's candidates of maximal relevance."""
    relevance = item.relevance
    best = max(relevance.values())
    return [clips[cid].text for cid in item.candidates if relevance[cid] == best]


@cache
def _sentence_bleu() -> Any:
    from sacrebleu.metrics.bleu import BLEU

    return BLEU(max_ngram_order=4, effective_order=True, lowercase=True)


@cache
def _rouge_l() -> Any:
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"])


def bleu_statistics(hypothesis: str, references: Sequence[str]) -> FloatArray:
    """[sys_len, ref_len, matches 1..4, totals 1..4] of one description (sacrebleu)."""
    score = _sentence_bleu().sentence_score(hypothesis, list(references))
    return np.array([score.sys_len, score.ref_len, *score.counts, *score.totals], dtype=float)


def corpus_bleu(statistics: FloatArray, order: int) -> float:
    """Corpus BLEU with n-grams up to `order` from summed statistics, 0-1."""
    from sacrebleu.metrics.bleu import BLEU

    sys_len, ref_len = int(statistics[0]), int(statistics[1])
    matches = [int(x) for x in statistics[2 : 2 + order]]
    totals = [int(x) for x in statistics[6 : 6 + order]]
    score = BLEU.compute_bleu(
        matches, totals, sys_len, ref_len, smooth_method="exp", max_ngram_order=order
    )
    return float(score.score) / 100.0


def rouge_l(hypothesis: str, references: Sequence[str]) -> float:
    return float(_rouge_l().score_multi(list(references), hypothesis)["rougeL"].fmeasure)


def _bleu_summaries(
    statistics: FloatArray, *, n_bootstrap: int, seed: int
) -> dict[str, MetricSummary]:
    """Corpus BLEU-1..4 of the items' summed statistics, with a CI over resampled items."""
    n = len(statistics)
    summed = np.empty((n_bootstrap, statistics.shape[1]))
    for rows, counts in resample_counts(n_bootstrap, n, np.random.default_rng(seed)):
        summed[rows] = counts @ statistics
    total = statistics.sum(axis=0)
    out = {}
    for order in BLEU_ORDERS:
        boot = [corpus_bleu(row, order) for row in summed]
        low, high = np.percentile(boot, [2.5, 97.5])
        out[f"bleu_{order}"] = MetricSummary(
            mean=round(corpus_bleu(total, order), 6), ci95=(round(low, 6), round(high, 6))
        )
    return out


def description_metrics(
    items: Sequence[Item],
    clips: dict[str, Clip],
    records: Iterable[Record],
    *,
    n_bootstrap: int = 1000,
    seed: int = 0,
) -> dict[str, Any] | None:
    """The `description` block of metrics.json; None when no record holds a description."""
    written: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        if isinstance(record.extra.get("description"), str):
            written[record.item_id].append(record)
    if not written:
        return None
    evaluated = [item for item in items if item.id in written]
    statistics: list[FloatArray] = []
    rouge: list[float] = []
    cosine: list[float] = []
    words: list[float] = []
    for item in evaluated:
        references = references_of(item, clips)
        texts = [str(r.extra["description"]) for r in written[item.id]]
        statistics.append(np.sum([bleu_statistics(t, references) for t in texts], axis=0))
        rouge.append(float(np.mean([rouge_l(t, references) for t in texts])))
        given = [r.extra.get("reference_cosine") for r in written[item.id]]
        usable = [float(v) for v in given if isinstance(v, int | float)]
        cosine.append(float(np.mean(usable)) if usable else np.nan)
        words.append(float(np.mean([len(t.split()) for t in texts])))
    metrics = _bleu_summaries(np.array(statistics), n_bootstrap=n_bootstrap, seed=seed)
    for name, values in (("rouge_l", rouge), ("embedding_cosine", cosine)):
        per_item = np.array([values], dtype=float)
        metrics[name] = summarize(name, per_item, n_bootstrap=n_bootstrap, seed=seed)
    return {
        "n_items": len(evaluated),
        "n_items_without_description": sum(item.id not in written for item in items),
        "reference": "caption of the item's most relevant candidate",
        "mean_words": round(float(np.mean(words)), 3),
        "metrics": {name: metrics[name].to_json() for name in registry.names("description")},
    }


def description_blocks(
    dataset: Dataset, records: Iterable[Record], *, n_bootstrap: int, seed: int
) -> dict[str, Any]:
    """The describe protocol's metrics.json block, `description`, when a record holds one."""
    block = description_metrics(
        dataset.items, dataset.clips, records, n_bootstrap=n_bootstrap, seed=seed
    )
    return {} if block is None else {"description": block}
