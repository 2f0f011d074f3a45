"""What both sides of a comparison must share before it means anything: the same items (their
content, not only their ids), and answers to compare. An item one side did not answer is left
out by default (`--missing exclude`), counted at chance level for that side (`worst`, as the
run's own metrics count it), or stops the comparison (`refuse`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from harness.core.errors import HarnessError

if TYPE_CHECKING:  # the CLI imports MissingChoice, and stays free of pydantic until it runs
    from harness.core.dataset import Dataset

MissingChoice = Literal["exclude", "worst", "refuse"]


def _shown(ids: Sequence[str]) -> str:
    return ", ".join(ids[:5]) + (", ..." if len(ids) > 5 else "")


@dataclass(frozen=True)
class Coverage:
    """Which of the items both datasets hold each side answered, and which the comparison
    visits (`compared`, in dataset order); `unshared`: items only one dataset holds."""

    missing: MissingChoice
    items: list[str]
    a_only: list[str]
    b_only: list[str]
    neither: list[str]
    compared: list[str]
    unshared: int = 0

    @classmethod
    def of(
        cls,
        items: Sequence[str],
        answered: tuple[set[str], set[str]],
        missing: MissingChoice,
        labels: tuple[str, str],
        unshared: int = 0,
    ) -> Coverage:
        if missing == "refuse" and unshared:
            raise HarnessError(
                f"{unshared} item(s) are in only one of the two datasets ({labels[0]}'s and "
                f"{labels[1]}'s; a `limit:`?): --missing exclude compares the items both hold"
            )
        a, b = answered
        both = [i for i in items if i in a and i in b]
        coverage = cls(
            missing,
            list(items),
            [i for i in items if i in a and i not in b],
            [i for i in items if i in b and i not in a],
            [i for i in items if i not in a and i not in b],
            list(items) if missing == "worst" else both,
            unshared,
        )
        if missing == "refuse" and len(both) < len(items):
            gaps = [
                f"{label} has no answer for {len(lacking)} of the {len(items)} items "
                f"({_shown(lacking)})"
                for label, side in zip(labels, answered, strict=True)
                if (lacking := [i for i in items if i not in side])
            ]
            raise HarnessError(
                "; ".join(gaps) + ": --missing exclude compares the items both answered"
            )
        if not coverage.compared:
            raise HarnessError(f"no item answered by both {labels[0]} and {labels[1]}")
        return coverage

    @property
    def both(self) -> int:
        return len(self.items) - len(self.a_only) - len(self.b_only) - len(self.neither)

    def to_json(self) -> dict[str, Any]:
        return {
            "missing": self.missing,
            "items": len(self.items),
            "answered_by_both": self.both,
            "answered_by_a_only": len(self.a_only),
            "answered_by_b_only": len(self.b_only),
            "answered_by_neither": len(self.neither),
            "in_one_dataset_only": self.unshared,
            "compared": len(self.compared),
        }

    def warning(self, labels: tuple[str, str]) -> str | None:
        """What to know before reading the result; None when both answered every item."""
        n = len(self.items)
        unshared = f"; {self.unshared} item(s) only one of the datasets holds are left out"
        if self.both == n:
            return unshared[2:] if self.unshared else None
        counts = (self.both + len(self.a_only), self.both + len(self.b_only))
        said = [
            f"{label} answered all {n}"
            if count == n
            else f"{label} answered {count} of the {n} items"
            for label, count in sorted(zip(labels, counts, strict=True), key=lambda p: p[1] == n)
        ]
        if self.missing == "worst":
            how = "an item one side did not answer is counted at chance level for it"
        else:
            how = f"compared on the {self.both} items both answered"
        return f"{'; '.join(said)}: {how}" + (unshared if self.unshared else "")


def _audio_digest(dataset: Dataset, relative: str) -> str:
    from harness.core.files import sha256_of
    from harness.core.paths import contained

    try:
        return sha256_of(contained(Path(dataset.root), relative))
    except (HarnessError, ValueError) as exc:  # (UnsafePath is a ValueError)
        return f"unreadable: {exc}"


def _item_view(dataset: Dataset, item_id: str) -> dict[str, Any]:
    """What an item is to a judge: its fields, its clips and every audio file's bytes."""
    from harness.core.items import FIELDS

    item = dataset.item(item_id)
    view: dict[str, Any] = {name: getattr(item, name) for name in FIELDS} | item.model_extra
    view["dialogue"] = [(turn.speaker, turn.text) for turn in item.dialogue]
    audio = list(item.context_audio or ())
    for cid in item.candidates:
        clip = dataset.clips.get(cid)
        view[f"clip {cid}"] = None if clip is None else clip.model_dump()
        if clip is not None and clip.audio is not None:
            audio.append(clip.audio)
    for relative in audio:
        view[f"audio file {relative}"] = _audio_digest(dataset, relative)
    return view


def check_same_items(datasets: tuple[Dataset, Dataset], ids: Iterable[str]) -> None:
    """Stop unless the items `ids` are the same in A's and B's dataset, naming what differs."""
    a, b = datasets
    if Path(a.root).resolve() == Path(b.root).resolve():
        return
    for item_id in ids:
        left, right = _item_view(a, item_id), _item_view(b, item_id)
        differs = [key for key in left.keys() | right.keys() if left.get(key) != right.get(key)]
        if differs:
            raise HarnessError(
                f"item {item_id}: {sorted(differs)[0]} differs between A's dataset {a.root} "
                f"and B's {b.root}: compare runs of the same dataset"
            )
