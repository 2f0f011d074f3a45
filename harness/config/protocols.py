"""The protocol registry: what `protocol:` in an experiment file selects. A protocol is one
module plus one `register_protocol` entry (CONTRIBUTING.md), or an entry point
`bgm_judge.protocols` naming a `Protocol` (`harness.core.plugins`). Signatures:

- metrics: `(dataset, records, *, n_bootstrap, seed) -> {block: value}`
- report: `(runs) -> [Section]`, runs being (label, metrics.json) pairs
- dataset: `(options, path, *, seed) -> Dataset`
- evaluate: `(options, path, records, *, n_bootstrap, seed) -> Evaluation`
- trec: `(options, path, tag) -> (run lines, qrels lines)`

References are the object or `"module:attribute"`, imported when first used, so this module
names the layers above it without importing them.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness.core.errors import HarnessError
from harness.core.plugins import Registry, named
from providers import REGISTRY

if TYPE_CHECKING:
    from harness.core.dataset import Dataset
    from harness.core.records import Record

Ref = Any  # the object, or "module:attribute"


@dataclass(frozen=True)
class Protocol:
    name: str
    summary: str
    plans: Mapping[str, Ref]  # provider kind ("judge", "scorer") -> its CallPlan class
    prompt: str | None = None  # the prompt variant its judges are asked with
    blocks: tuple[str, ...] = ()  # the metrics.json blocks it adds
    metrics: Ref | None = None  # computes the blocks its records carry
    report: Ref | None = None  # its report sections
    options: Ref | None = None  # the model of its own block in an experiment file
    dataset_file: str | None = None  # its own dataset form's file in a dataset folder
    dataset: Ref | None = None  # a run's items from that form
    evaluate: Ref | None = None  # its own scoring of a run or a predictions file
    trec: Ref | None = None  # its own `harness export trec`

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(self.plans)

    def blocks_of(
        self,
        dataset: Dataset,
        records: Iterable[Record],
        evaluated: Mapping[str, Any],
        *,
        n_bootstrap: int,
        seed: int,
    ) -> dict[str, Any]:
        """Its metrics.json blocks: those of `evaluated` and those `metrics` computes."""
        blocks = {key: value for key, value in evaluated.items() if key in self.blocks}
        if self.metrics is not None:
            blocks |= resolve(self.metrics)(dataset, records, n_bootstrap=n_bootstrap, seed=seed)
        return blocks


PROTOCOLS: Registry[Protocol] = Registry("protocols", named(Protocol))


def register_protocol(protocol: Protocol) -> Protocol:
    """Add a protocol (a name registered again replaces its entry)."""
    PROTOCOLS[protocol.name] = protocol
    return protocol


def get_protocol(name: str) -> Protocol:
    if name not in PROTOCOLS:
        known = ", ".join(PROTOCOLS)
        raise HarnessError(f"unknown protocol {name!r} (known: {known})")
    return PROTOCOLS[name]


def protocol_prompts() -> dict[str, str]:
    """protocol -> the prompt variant it asks judges with, for those that have one."""
    return {p.name: p.prompt for p in PROTOCOLS.values() if p.prompt is not None}


def own_blocks(data: Any) -> Any:
    """Settings with each protocol's own block (`music-crs: {...}`) under `protocol_options`."""
    if not isinstance(data, Mapping):
        return data
    named = [name for name, p in PROTOCOLS.items() if p.options is not None and name in data]
    if not named:
        return data
    own = dict(data.get("protocol_options") or {}) | {name: data[name] for name in named}
    return {k: v for k, v in data.items() if k not in named} | {"protocol_options": own}


def own_options(name: str, blocks: Mapping[str, Any]) -> Any:
    """Protocol `name`'s own settings, validated (None when it takes none); ValueError."""
    from pydantic import ValidationError

    from harness.core.dataset import pydantic_reason

    protocol = get_protocol(name)
    if protocol.options is None:
        if name in blocks:
            raise ValueError(f"protocol: {name} takes no block of its own")
        return None
    try:
        return resolve(protocol.options).model_validate(blocks.get(name, {}))
    except ValidationError as exc:
        raise ValueError(f"{name}.{pydantic_reason(exc)}") from None


def resolve(ref: Ref) -> Any:
    """The object a reference names."""
    if not isinstance(ref, str):
        return ref
    module, _, attribute = ref.partition(":")
    return getattr(importlib.import_module(module), attribute)


def legacy_protocol(settings: Mapping[str, Any]) -> str | None:
    """The protocol that settings of before `protocol:` meant (a judge's `prompt: describe`,
    a `rerank:` block); None when `protocol:` says it or neither applies."""
    if settings.get("protocol", "rank") != "rank":
        return None
    provider = settings.get("provider")
    name = provider.get("name") if isinstance(provider, Mapping) else getattr(provider, "name", "")
    judge = getattr(REGISTRY.get(str(name)), "kind", "judge") == "judge"
    if settings.get("prompt") == "describe" and judge:
        return "describe"
    if settings.get("rerank") is not None and judge:
        return "rerank"
    return None


def protocol_of(config: Mapping[str, Any]) -> Protocol:
    """The protocol of a run folder's config.yaml, older ones included."""
    return get_protocol(legacy_protocol(config) or str(config.get("protocol") or "rank"))


_PLANS = "harness.protocols.plans"
_TABLES = "harness.reports.protocol_tables"
register_protocol(
    Protocol(
        "rank",
        "rank each item's candidates: a judge's prompts, or a scorer's similarities",
        plans={"judge": f"{_PLANS}:JudgeCalls", "scorer": f"{_PLANS}:ScorerCalls"},
        blocks=("reliability",),  # a judge's (`harness.runs.run_folder.evaluate_run`)
        report="harness.reports.reliability_tables:reliability_section",
    )
)
register_protocol(
    Protocol(
        "refine",
        "two turns (MuseChat): rank, the user replies to the top pick, rank again",
        plans=dict.fromkeys(("judge", "scorer"), "harness.protocols.refine:RefineCalls"),
        blocks=("turns", "turn_gain"),
        report=f"{_TABLES}:turns_section",
    )
)
register_protocol(
    Protocol(
        "describe",
        "a judge describes the music, a retriever ranks the candidates by it (MetaBGM)",
        plans={"judge": "harness.protocols.describe:DescribeCalls"},
        prompt="describe",
        blocks=("description",),
        metrics="harness.scoring.description_metrics:description_blocks",
        report=f"{_TABLES}:description_section",
    )
)
register_protocol(
    Protocol(
        "rerank",
        "a scorer ranks every candidate, the judge reorders its top K (`rerank:`)",
        plans={"judge": "harness.protocols.rerank:RerankCalls"},
    )
)
_MUSIC_CRS = "harness.protocols.music_crs"
register_protocol(
    Protocol(
        "music-crs",
        "RecSys Challenge 2026 Music-CRS: a submission's nDCG, diversity and judged responses",
        plans={"judge": f"{_PLANS}:JudgeCalls"},
        prompt="response_judge",
        blocks=("turns", "turn_gain", "plain_mean", "official", "validation"),
        options=f"{_MUSIC_CRS}:MusicCrsOptions",
        dataset_file="sessions.jsonl",
        dataset=f"{_MUSIC_CRS}:judged_dataset",
        evaluate=f"{_MUSIC_CRS}:evaluate",
        trec=f"{_MUSIC_CRS}:trec_lines",
    )
)
