"""The judge-reliability block of metrics.json (docs/metrics.md#judge-reliability). An answer
is one full ranking of an item: a joint call, or a pointwise run's calls of one item and
repeat. Each figure is a mean over items with a bootstrap CI; one the design cannot give is
left out, and `not_measured` names the `--set` settings of a run that measures it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from harness.core.dataset import Item
from harness.core.records import Record
from harness.scoring.human_agreement import human_agreement
from harness.scoring.metrics import kendall_tau_b
from harness.scoring.sorted_block import FloatArray, IntArray
from harness.scoring.stats import paired_bootstrap_ci, uniform_p_value

NDBool = NDArray[np.bool_]


@dataclass(frozen=True)
class Answers:
    """A judge's answers as arrays: item, order (a code per order shown, -1: none), scores in
    candidate order (missing -inf, padding NaN), candidate shown at each position (-1: none);
    per call, its item and whether it failed, did not parse or was refused."""

    item: IntArray
    order: IntArray
    scores: FloatArray
    shown: IntArray
    width: IntArray
    call_item: IntArray
    call_flags: FloatArray  # calls x (error, parse failure, refusal)
    repeats: int

    @classmethod
    def of(cls, items: Sequence[Item], records: Iterable[Record]) -> Answers:
        """The answers of a judge's records (one pass) that scored at least one candidate."""
        index = {item.id: i for i, item in enumerate(items)}
        rows: list[tuple[int, int, list[str], Mapping[str, float | None]]] = []
        pointwise: dict[tuple[int, int], dict[str, float | None]] = {}
        calls: list[tuple[int, bool, bool, bool]] = []
        repeats: set[int] = set()
        for record in records:
            at = index.get(record.item_id)
            if at is None:
                continue
            refused = bool(record.extra.get("blocked") or record.extra.get("refusal"))
            calls.append((at, record.error is not None, record.parse_error is not None, refused))
            repeats.add(record.repeat)
            if not any(v is not None for v in record.scores.values()):
                continue
            if len(record.candidates) > 1:
                rows.append((at, record.repeat, record.candidates, record.scores))
            else:
                pointwise.setdefault((at, record.repeat), {}).update(record.scores)
        rows += [(at, r, [], scores) for (at, r), scores in pointwise.items()]
        rows.sort(key=lambda row: row[:3])  # records.jsonl's order, however they came
        n, width = len(rows), max((len(item.candidates) for item in items), default=0)
        answers = cls(
            np.zeros(n, dtype=np.int64),
            np.full(n, -1, dtype=np.int64),
            np.full((n, width), np.nan),
            np.full((n, width), -1, dtype=np.int64),
            np.zeros(n, dtype=np.int64),
            np.array([c[0] for c in calls], dtype=np.int64),
            np.array([c[1:] for c in calls], dtype=np.float64).reshape(len(calls), 3),
            len(repeats),
        )
        codes: dict[tuple[str, ...], int] = {}
        for row, (at, _, shown, scores) in enumerate(rows):
            candidates = items[at].candidates
            answers.item[row], answers.width[row] = at, len(candidates)
            values = [scores.get(cid) for cid in candidates]
            answers.scores[row, : len(candidates)] = [-np.inf if v is None else v for v in values]
            if shown:
                answers.order[row] = codes.setdefault(tuple(shown), len(codes))
                answers.shown[row, : len(shown)] = [candidates.index(cid) for cid in shown]
        return answers

    @property
    def top_shares(self) -> FloatArray:
        """Each candidate's share of the answer's top pick (1/k each of k tied at the top)."""
        filled = np.where(np.isnan(self.scores), -np.inf, self.scores)
        top = filled == filled.max(axis=1, keepdims=True, initial=-np.inf)
        shares: FloatArray = top / np.maximum(top.sum(axis=1, keepdims=True), 1)
        return shares


@dataclass(frozen=True)
class Pairs:
    """Every pair of answers of one item: whether their orders are equal (none counts as
    equal) or given and different, the chance their top picks agree, their tau-b."""

    item: IntArray
    same: NDBool
    different: NDBool
    top_agree: FloatArray
    tau: FloatArray

    @classmethod
    def of(cls, answers: Answers) -> Pairs:
        by_item = np.argsort(answers.item, kind="stable")
        _, starts, sizes = np.unique(answers.item[by_item], return_index=True, return_counts=True)
        first, second = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
        for size in np.unique(sizes):  # the items with `size` answers, all at once
            i, j = np.triu_indices(int(size), 1)
            at = starts[sizes == size][:, None]
            first.append(by_item[(at + i).ravel()])
            second.append(by_item[(at + j).ravel()])
        a, b = np.concatenate(first), np.concatenate(second)
        tau = np.zeros(a.size)
        for w in np.unique(answers.width[a]):
            sel = answers.width[a] == w
            tau[sel] = kendall_tau_b(answers.scores[a[sel], :w], answers.scores[b[sel], :w])
        shares = answers.top_shares
        same = answers.order[a] == answers.order[b]
        ordered = (answers.order[a] >= 0) & (answers.order[b] >= 0)
        return cls(answers.item[a], same, ordered & ~same, (shares[a] * shares[b]).sum(1), tau)


def _mean(values: FloatArray, item: IntArray, n_bootstrap: int, seed: int) -> dict[str, Any] | None:
    """The mean over items of each item's mean of `values`, with its bootstrap CI."""
    total, count = np.bincount(item, weights=values), np.bincount(item)
    per_item = total[count > 0] / count[count > 0]
    if per_item.size == 0:
        return None
    low, high = paired_bootstrap_ci(per_item, n_bootstrap=n_bootstrap, seed=seed)
    mean = round(float(per_item.mean()), 6)
    return {"mean": mean, "ci95": [round(low, 6), round(high, 6)], "n_items": int(per_item.size)}


def _figures(
    answers: Answers, pairs: Pairs, missing: Mapping[str, Any], **ci: int
) -> dict[str, Any]:
    """The figures the design gives (docs/metrics.md#judge-reliability)."""
    block: dict[str, Any] = {}
    shares = answers.top_shares
    if "position_consistency" not in missing:
        k, ordered = pairs.different, np.flatnonzero(answers.order >= 0)
        shown = answers.shown[ordered]
        picked = np.take_along_axis(shares[ordered], np.maximum(shown, 0), axis=1)
        picked = np.where(shown >= 0, picked, np.nan)
        width = int(answers.width[ordered].max())
        by_position = [
            _mean(picked[keep, p], answers.item[ordered][keep], **ci)
            for p in range(width)
            if (keep := np.isfinite(picked[:, p])).any()
        ]
        block["position_consistency"] = {
            "top_pick": _mean(pairs.top_agree[k], pairs.item[k], **ci),
            "tau_b": _mean(pairs.tau[k], pairs.item[k], **ci),
        }
        block["preference_fairness"] = {
            "top1_rate": by_position,
            "uniform": round(1.0 / width, 6),
            "p_value": uniform_p_value(np.nansum(picked, axis=0)[:width]),
        }
    if "repetition_stability" not in missing:
        k = pairs.same
        block["repetition_stability"] = {
            "tau_b": _mean(pairs.tau[k], pairs.item[k], **ci),
            "top_pick_change": _mean(1.0 - pairs.top_agree[k], pairs.item[k], **ci),
        }
    flags = ("error", "parse_failure", "refusal")
    rates = {
        f: _mean(answers.call_flags[:, c], answers.call_item, **ci) for c, f in enumerate(flags)
    }
    tied = ((shares > 0).sum(axis=1) > 1).astype(np.float64)
    return block | {"rates": rates | {"tie": _mean(tied, answers.item, **ci)}}


def unmeasured(answers: Answers, pairs: Pairs, sampled: bool) -> dict[str, Any]:
    """What the design leaves out, each with the `--set` settings of a run that measures it."""
    width = int(answers.width.max(initial=0))
    permuted = bool(pairs.different.any())
    out: dict[str, Any] = {}
    if not permuted:
        joint = bool((answers.order >= 0).any())
        reason = "every item shown in one order only" if joint else "one candidate per prompt"
        settings = ["prompt_options.order=permuted", f"repeats={width}"]
        why = {"reason": reason, "set": ["prompt=joint"] * (not joint) + settings}
        out |= {"position_consistency": why, "preference_fairness": why}
    squares = ["prompt_options.squares=1", f"repeats={3 * width}"] if permuted else ["repeats=3"]
    if not sampled:
        reason = "greedy decoding (temperature 0): a repeat is the cached answer"
        out["repetition_stability"] = {
            "reason": reason,
            "set": ["provider.temperature=0.7", *squares],
        }
    elif not pairs.same.any():
        reason = "no order shown twice to an item" if answers.repeats > 1 else "one repeat"
        out["repetition_stability"] = {"reason": reason, "set": squares}
    return out


def judge_reliability(
    items: Sequence[Item],
    records: Iterable[Record],
    scores: Mapping[str, FloatArray],
    *,
    sampled: bool,
    n_bootstrap: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """The block of a judge's `records` (read once): `scores`, its mean scores per item, for
    the agreement with humans; `sampled`: whether a repeat is a fresh answer."""
    answers = Answers.of(items, records)
    pairs = Pairs.of(answers)
    missing = unmeasured(answers, pairs, sampled)
    block: dict[str, Any] = {"n_items": len(np.unique(answers.item))}
    block["n_answers"] = len(answers.item)
    block |= _figures(answers, pairs, missing, n_bootstrap=n_bootstrap, seed=seed)
    agreement, left_out = human_agreement(items, scores, n_bootstrap=n_bootstrap, seed=seed)
    block |= agreement
    if missing or left_out:
        block["not_measured"] = missing | left_out
    return block
