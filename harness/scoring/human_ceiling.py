"""The human ceiling: how well each annotator ranks the candidates against the consensus of
the other annotators (leave-one-out), on the same metrics and the same bootstrap as a model.

Items with `annotations` from two or more annotators take part: each annotator's ranking
becomes scores (N-1 ... 0) against the Borda consensus of the others (`consensus`), each
annotator one "repeat", so `std` is the spread across annotators.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.core.dataset import Item
from harness.scoring.consensus import consensus
from harness.scoring.metrics import Aggregate, aggregate, build_matrix

HUMAN_ROW = "human (leave-one-out)"


def annotator_names(item: Item) -> list[str]:
    """The names of the item's annotators (`annotators`), else "annotator 1", "annotator 2", ..."""
    names = (item.model_extra or {}).get("annotators")
    count = len(item.annotations or ())
    if isinstance(names, list) and len(names) == count:
        return [str(name) for name in names]
    return [f"annotator {index + 1}" for index in range(count)]


def human_ceiling(
    items: Sequence[Item], *, n_bootstrap: int = 1000, seed: int = 0
) -> Aggregate | None:
    """Each annotator against the leave-one-out consensus; None without annotated items."""
    annotated = [item for item in items if item.annotations and len(item.annotations) >= 2]
    if not annotated:
        return None
    names = list(dict.fromkeys(name for item in annotated for name in annotator_names(item)))
    matrices = []
    for name in names:
        pseudo: list[Item] = []
        scores: dict[str, dict[str, float | None]] = {}
        for item in annotated:
            rankings = list(item.annotations or ())
            mine = annotator_names(item)
            if name in mine:
                index = mine.index(name)
                others = rankings[:index] + rankings[index + 1 :]
                relevance = tuple(consensus(others, item.candidates))
                n = len(item.candidates)
                scores[item.id] = {cid: float(n - 1 - p) for p, cid in enumerate(rankings[index])}
            else:
                relevance = tuple(item.candidates)  # unused: no scores, the item is excluded
            pseudo.append(
                Item(
                    id=item.id,
                    dialogue=item.dialogue,
                    query=item.query,
                    context_audio=item.context_audio,
                    candidates=item.candidates,
                    human_ranking=relevance,
                )
            )
        matrices.append(build_matrix(pseudo, scores))
    return aggregate(matrices, missing="exclude", n_bootstrap=n_bootstrap, seed=seed)
