"""The metric table: each metric by its name in metrics.json, with its label in tables, its
range, which way is better, when it is reported and, for a ranking metric, its per-item
function. The evaluation, reports, figures, `harness compare` and `harness runs` read only
this table, so a metric is one entry (CONTRIBUTING.md):

    @register_metric("top_relevant", "top rel.")
    def top_relevant(block: RankedBlock, k: int) -> FloatArray:
        return (block.sorted.gains[:, 0] > 0).astype(float)

`block` is a `harness.scoring.ranking.RankedBlock`; the function gives one value per row, `k`
being K of a family `NAME@K` (0 otherwise). Kinds: `ranking` (always reported), `retrieval`
(at each K of `metrics: {at: [...]}`), `single-gold` (every item has one relevant candidate);
the others are computed by their protocol. A package adds one through an entry point
`bgm_judge.metrics` (`harness.core.plugins`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, get_args

from harness.core.plugins import Registry, named

if TYPE_CHECKING:
    from harness.scoring.ranking import RankedBlock
    from harness.scoring.sorted_block import FloatArray

    PerItem = Callable[[RankedBlock, int], FloatArray]

Kind = Literal["ranking", "retrieval", "single-gold", "turns", "description", "conversation"]
KINDS: tuple[Kind, ...] = get_args(Kind)
UNIT = (0.0, 1.0)


@dataclass(frozen=True)
class Metric:
    """One row of the table. A family's name and label end in `@K` (`recall@K`, `R@K`)."""

    name: str
    label: str
    kind: Kind = "ranking"
    bound: tuple[float, float] | None = UNIT  # the range of a per-item value; None: unbounded
    higher_is_better: bool = True
    statistic: Literal["mean", "median"] = "mean"  # over items
    shown: bool = True  # a column of the metric tables (else in metrics.json and CSV only)
    per_item: PerItem | None = None

    @property
    def cutoff(self) -> bool:
        return self.name.endswith("@K")

    def at(self, k: int) -> str:
        return self.name.removesuffix("K") + str(k) if self.cutoff else self.name


METRICS: Registry[Metric] = Registry("metrics", named(Metric))


def register_metric(
    name: str,
    label: str,
    *,
    kind: Kind = "ranking",
    bound: tuple[float, float] | None = UNIT,
    higher_is_better: bool = True,
    statistic: Literal["mean", "median"] = "mean",
    shown: bool = True,
) -> Callable[[PerItem | None], PerItem | None]:
    """Decorate a per-item function (or call on None for a protocol's metric) to add a
    metric; a name registered again replaces its entry."""

    def register(per_item: PerItem | None) -> PerItem | None:
        METRICS[name] = Metric(
            name, label, kind, bound, higher_is_better, statistic, shown, per_item
        )
        return per_item

    return register


def metrics() -> list[Metric]:
    """The table in metrics.json's order: by kind (as KINDS), then by registration."""
    order = {kind: i for i, kind in enumerate(KINDS)}
    return sorted(METRICS.values(), key=lambda m: order.get(m.kind, len(KINDS)))


_MEMBER = re.compile(r"(.+)@([1-9][0-9]*)")


def find(name: str) -> Metric | None:
    """The entry of `name`, or of its family (`recall@20` -> `recall@K`)."""
    if name in METRICS:
        return METRICS[name]
    member = _MEMBER.fullmatch(name)
    return METRICS.get(f"{member[1]}@K") if member else None


def cutoff_of(name: str) -> int | None:
    """K of a family member (`ndcg@10` -> 10); None for other names."""
    metric, member = find(name), _MEMBER.fullmatch(name)
    return int(member[2]) if metric is not None and metric.cutoff and member else None


def names(kind: Kind, at: Sequence[int] = ()) -> tuple[str, ...]:
    """The names of one kind in table order, a family at each K of `at` (less the names a
    metric of their own has, `hit@1`)."""
    out: list[str] = []
    for metric in metrics():
        if metric.kind == kind:
            family = [metric.at(k) for k in at] if metric.cutoff else [metric.name]
            out += [name for name in family if name == metric.name or name not in METRICS]
    return tuple(out)


def label(name: str) -> str:
    """How tables show a metric (`recall@20` -> `R@20`); an unknown name with spaces."""
    metric, k = find(name), cutoff_of(name)
    if metric is None:
        return name.replace("_", " ")
    return metric.label.removesuffix("K") + str(k) if k else metric.label


def shown(present: Iterable[str], *, compact: bool = False) -> list[str]:
    """The metric columns of a table of blocks holding `present`: the `ranking` metrics (if
    any is present), then each other shown one present, a family at the Ks present (the
    largest only when `compact`)."""
    present = set(present)
    retrieval = [name for name in present if getattr(find(name), "kind", None) == "retrieval"]
    ks = sorted({k for name in retrieval if (k := cutoff_of(name))})
    ks = (ks[-1:] if compact else ks) or [1]
    ranked = any(getattr(find(name), "kind", None) == "ranking" for name in present)
    out: list[str] = []
    for metric in metrics():
        if not metric.shown:
            continue
        if metric.cutoff:
            out += [name for k in ks if (name := metric.at(k)) in present]
        elif (metric.kind == "ranking" and (ranked or not present)) or metric.name in present:
            out.append(metric.name)
    return out


def comparable(name: str) -> tuple[tuple[int, ...], float] | None:
    """(its cut-offs, the width of its range) of a bounded per-item metric (`harness compare
    --metric`); None for any other name."""
    metric, k = find(name), cutoff_of(name)
    if metric is None or metric.per_item is None or metric.bound is None:
        return None
    if metric.cutoff and k is None:
        return None
    low, high = metric.bound
    return ((k,) if k else ()), high - low


# The built-in table (formulas: harness.scoring.ranking, docs/metrics.md).
register_metric("hit@1", "Hit@1")(lambda block, k: block.best.hit(1))
register_metric("mrr", "MRR")(lambda block, k: block.best.reciprocal_rank(block.harmonic))
register_metric("ndcg", "nDCG")(lambda block, k: block.ndcg())
register_metric("kendall_tau_b", "tau-b", bound=(-1.0, 1.0))(lambda block, k: block.tau_b())
register_metric("hit@K", "Hit@K", kind="retrieval", shown=False)(lambda block, k: block.best.hit(k))
register_metric("recall@K", "R@K", kind="retrieval")(lambda block, k: block.recall(k))
register_metric("precision@K", "P@K", kind="retrieval", shown=False)(
    lambda block, k: block.precision(k)
)
register_metric("ndcg@K", "nDCG@K", kind="retrieval")(lambda block, k: block.ndcg_at(k))
register_metric(
    "median_rank",
    "median rank",
    kind="single-gold",
    bound=None,
    higher_is_better=False,
    statistic="median",
)(lambda block, k: block.gold_rank)
register_metric("mean_rank", "mean rank", kind="single-gold", bound=None, higher_is_better=False)(
    lambda block, k: block.gold_rank
)
register_metric("success@K", "SR@K", kind="turns")(None)
for _order in (1, 2, 3, 4):
    register_metric(f"bleu_{_order}", f"BLEU-{_order}", kind="description", shown=False)(None)
register_metric("rouge_l", "ROUGE-L", kind="description", shown=False)(None)
register_metric("embedding_cosine", "cosine", kind="description", bound=(-1.0, 1.0), shown=False)(
    None
)
register_metric("catalog_diversity", "catalog div.", kind="conversation")(None)
register_metric("lexical_diversity", "Distinct-2", kind="conversation")(None)
for _name, _label in (("personalization", "personal."), ("explanation_quality", "explanation")):
    register_metric(_name, _label, kind="conversation", bound=(1.0, 5.0))(None)
register_metric("judge", "judge", kind="conversation", bound=(1.0, 5.0))(None)
register_metric("composite", "composite", kind="conversation")(None)
