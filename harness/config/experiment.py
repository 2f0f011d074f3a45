"""The settings of a run (`ExperimentConfig`) and of a sweep (`SweepConfig`, which expands to
one run per combination of its providers, prompts and inputs)."""

from __future__ import annotations

import itertools
import re
from collections import Counter
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from harness.calls.prompting.context_audio import ContextAudioBudget
from harness.config.blocks import MetricsOptions, RefineOptions, RerankOptions, TrackingOptions
from harness.config.inputs import Inputs, Pin
from harness.config.protocols import (
    get_protocol,
    legacy_protocol,
    own_blocks,
    own_options,
    protocol_prompts,
)
from harness.config.sources import HFSource, folder_for, is_hf_source, parse_hub_id
from harness.core.errors import HarnessError
from harness.core.types import BASE_FIELDS, ProviderConfig
from harness.scoring.metrics import MAX_BOOTSTRAP, MissingPolicy
from providers import REGISTRY, ProviderBlock, provider_class, provider_options

MAX_NAME = 200  # a run's folder name: file systems allow 255 bytes


def provider_config(name: str, **options: Any) -> ProviderConfig:
    """`provider_config("gemini", model="gemini-2.5-pro")`: a validated provider block."""
    return provider_options({"name": name, **options})


class CacheOptions(BaseModel):
    """`cache:` block: `seed`, a second response cache (a folder or a `harness cache export`
    file) read on a miss, its answers copied into the run's cache."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    seed: Path | None = None


class _Common(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$", max_length=MAX_NAME)
    dataset: Path
    # Set from `dataset: hf://...` (or a save_to_disk / Parquet path) and `columns:`; `dataset`
    # is then the folder the Hugging Face dataset is written to (harness.interop.hf).
    hf_source: HFSource | None = None
    tracking: TrackingOptions | None = Field(
        default=None, description="log each run to W&B and/or MLflow (harness.interop.tracking)"
    )
    prompt_options: dict[str, Any] = Field(default_factory=dict)
    repeats: int = Field(default=1, ge=1)
    missing: MissingPolicy = "worst"
    seed: int = Field(default=0, ge=0)
    limit: int | None = Field(default=None, gt=0, description="evaluate only the first N items")
    n_bootstrap: int = Field(default=1000, ge=10, le=MAX_BOOTSTRAP)
    cache: CacheOptions = CacheOptions()
    summarizer: ProviderBlock | None = Field(
        default=None,
        description="judge that writes missing summaries (default: the run's provider)",
    )
    metrics: MetricsOptions = MetricsOptions()
    context_audio_budget: ContextAudioBudget = ContextAudioBudget()
    rerank: RerankOptions | None = None
    protocol: str = Field(default="rank", description="harness.config.protocols")
    refine: RefineOptions = RefineOptions()
    user_simulator: ProviderBlock | None = Field(
        default=None, description="judge that plays the user (refine feedback: simulator)"
    )
    retriever: ProviderBlock | None = Field(
        default=None, description="scorer that ranks by a description (prompt: describe)"
    )
    # A protocol's own settings, written as a block named after it (`music-crs: {...}`).
    protocol_options: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _own_blocks(cls, data: Any) -> Any:
        return own_blocks(data)

    def own_options(self) -> Any:
        """The run's protocol's own settings, validated (None when it has none)."""
        return own_options(self.protocol, self.protocol_options)

    @model_validator(mode="before")
    @classmethod
    def _hugging_face_dataset(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        columns = data.get("columns")
        spec = data.get("dataset")
        if data.get("hf_source") is None and isinstance(spec, str | Path) and is_hf_source(spec):
            if str(spec).startswith("hf://"):
                try:
                    parse_hub_id(str(spec))
                except HarnessError as exc:
                    raise ValueError(str(exc)) from None
            source = HFSource.model_validate({"uri": str(spec), "columns": columns or {}})
            rest = {k: v for k, v in data.items() if k != "columns"}
            return rest | {"hf_source": source, "dataset": folder_for(source)}
        if columns is not None:
            raise ValueError(
                "columns: maps the columns of a Hugging Face dataset (dataset: hf://OWNER/NAME, "
                "a save_to_disk folder or Parquet files), not of a dataset folder"
            )
        return data

    @field_validator("protocol")
    @classmethod
    def _registered(cls, name: str) -> str:
        try:
            return get_protocol(name).name
        except HarnessError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("rerank", "retriever", "user_simulator")
    @classmethod
    def _of_its_kind(cls, value: Any, info: ValidationInfo) -> Any:
        field, block = str(info.field_name), value
        if isinstance(value, RerankOptions):
            field, block = "rerank.retriever", value.retriever
        kind = "judge" if field == "user_simulator" else "scorer"
        if block is not None and REGISTRY[block.name].kind != kind:
            raise ValueError(f"{field} must be a {kind}, not {block.name!r}")
        return value

    @model_validator(mode="after")
    def _protocol_settings(self) -> Self:
        if self.refine.feedback == "simulator" and self.user_simulator is None:
            raise ValueError("refine feedback: simulator needs a user_simulator: block")
        for name in self.protocol_options:
            if name != self.protocol:
                raise ValueError(f"the {name}: block goes with protocol: {name}")
        return self


class ExperimentConfig(_Common):
    provider: ProviderBlock
    prompt: str = "zero_shot"
    inputs: Inputs = Inputs()
    sweep: str | None = Field(default=None, description="name of the sweep this run came from")
    label: str | None = Field(
        default=None, min_length=1, max_length=60, description="the run's name in reports"
    )

    @property
    def results_subdir(self) -> Path:
        return Path(self.sweep, self.name) if self.sweep else Path(self.name)

    @property
    def kind(self) -> Literal["judge", "scorer"]:
        return REGISTRY[self.provider.name].kind

    @property
    def sends_audio(self) -> bool:
        """Whether the run's answers hear audio (so its bytes can change them)."""
        return self.inputs.music == "audio" or self.inputs.context_audio

    @model_validator(mode="before")
    @classmethod
    def _selected_protocol(cls, data: Any) -> Any:
        """Settings written before `protocol:` was the only selector name their protocol
        (`legacy_protocol`); a protocol with a prompt of its own asks judges with it."""
        if not isinstance(data, dict):
            return data
        data = {**data, "protocol": legacy_protocol(data) or data.get("protocol", "rank")}
        prompt = protocol_prompts().get(str(data["protocol"]))
        return data if prompt is None or "prompt" in data else {**data, "prompt": prompt}

    @model_validator(mode="after")
    def _protocol_fits(self) -> ExperimentConfig:
        protocol = get_protocol(self.protocol)
        if self.kind not in protocol.kinds:
            raise ValueError(
                f"protocol: {self.protocol} runs a {' or a '.join(protocol.kinds)}, and "
                f"{self.provider.name} is a {self.kind}"
            )
        owner = next((p for p, own in protocol_prompts().items() if own == self.prompt), None)
        if self.kind == "judge" and owner not in (None, self.protocol):
            raise ValueError(f"prompt: {self.prompt} goes with protocol: {owner}")
        if self.kind == "judge" and protocol.prompt not in (None, self.prompt):
            raise ValueError(f"protocol: {self.protocol} asks with prompt: {protocol.prompt}")
        if (self.rerank is not None) != (self.protocol == "rerank"):
            raise ValueError("protocol: rerank and its rerank: {retriever, top} go together")
        if self.retriever is not None and self.protocol != "describe":
            raise ValueError("retriever: ranks by a judge's description (protocol: describe)")
        self.own_options()  # a block with settings it needs, given
        return self


class SweepConfig(_Common):
    providers: list[ProviderBlock] = Field(min_length=1)
    prompts: list[str] = Field(default_factory=lambda: ["zero_shot"], min_length=1)
    inputs: list[Inputs] = Field(default_factory=lambda: [Inputs()], min_length=1)
    # What a provider entry pins: inputs (`inputs: {music: caption}` for a caption-only
    # scorer) and prompts (`prompts: [joint]`: only those of the sweep's variants).
    _pins: list[Pin] = PrivateAttr(default_factory=list)

    def _protocol(self, provider: ProviderBlock, prompt: str) -> str:
        """A run's protocol: the sweep's (or what its settings meant before `protocol:`), or
        `rank` for a provider of a kind the protocol does not run (a scorer in a rerank sweep)."""
        settings = {"protocol": self.protocol, "prompt": prompt, "provider": provider}
        name = legacy_protocol(settings | {"rerank": self.rerank}) or self.protocol
        return name if REGISTRY[provider.name].kind in get_protocol(name).kinds else "rank"

    def expand(self) -> list[ExperimentConfig]:
        runs = []
        per_run = (
            "providers prompts inputs name protocol summarizer rerank user_simulator retriever"
            " protocol_options"
        )
        common = self.model_dump(exclude=set(per_run.split()))
        pins = self._pins or [Pin()] * len(self.providers)
        seen: set[tuple[str, str, Inputs]] = set()
        for (provider, pin), prompt, entry_inputs in itertools.product(
            zip(self.providers, pins, strict=True), self.prompts, self.inputs
        ):
            if pin.prompts is not None and prompt not in pin.prompts:
                continue
            inputs = entry_inputs
            if pin.inputs is not None:
                inputs = entry_inputs.model_copy(update=pin.inputs.model_dump(exclude_unset=True))
            kind = REGISTRY[provider.name].kind
            if kind == "scorer":  # reads no prompt: one run, under the sweep's first prompt
                prompt = self.prompts[0]
            protocol = self._protocol(provider, prompt)
            own_prompt = get_protocol(protocol).prompt
            if kind == "judge" and own_prompt and "prompts" not in self.model_fields_set:
                prompt = own_prompt
            combination = (provider.model_dump_json(), prompt, inputs)
            if combination in seen:  # pinned inputs or a scorer made two combinations the same
                continue
            seen.add(combination)
            runs.append(
                ExperimentConfig(
                    **common,
                    name=run_name(provider, prompt if kind == "judge" else None, inputs),
                    provider=provider,
                    summarizer=self.summarizer,
                    user_simulator=self.user_simulator,
                    protocol=protocol,
                    retriever=self.retriever if protocol == "describe" else None,
                    rerank=self.rerank if protocol == "rerank" else None,
                    protocol_options=self.protocol_options if protocol == self.protocol else {},
                    prompt=prompt,
                    inputs=inputs,
                    sweep=self.name,
                )
            )
        runs = _distinct_names(runs)
        names = [r.name for r in runs]
        if len(set(names)) != len(names):
            raise ValueError(
                "two runs of the sweep get the same name: give the providers distinct models "
                "or a `label:` each"
            )
        return runs


def run_name(provider: ProviderConfig, prompt: str | None, inputs: Inputs) -> str:
    """`PROVIDER_MODEL_PROMPT_INPUTS` (`gemini_gemini-2.5-flash_cot_full_audio`): the model
    as set, else the provider's default one, its `label` instead where it has one."""
    shown = provider.label or provider.model or provider_class(provider.name).default_model
    model = re.sub(r"[^A-Za-z0-9_.\-]+", "-", shown or "").strip("-")
    return "_".join(p for p in (provider.name, model, prompt, inputs.label) if p)


def _distinct_names(runs: list[ExperimentConfig]) -> list[ExperimentConfig]:
    """Runs whose names collide (one provider listed with different options of its own, such
    as popularity's tie_break) get those options in their names: `..._tie_break-order`."""
    counts = Counter(run.name for run in runs)
    out = []
    for run in runs:
        if counts[run.name] > 1:
            own = run.provider.model_dump(exclude=set(BASE_FIELDS), exclude_unset=True)
            label = "_".join(f"{k}-{v}" for k, v in sorted(own.items()) if isinstance(v, str | int))
            if label:
                run = run.model_copy(update={"name": f"{run.name}_{label}"})
        out.append(run)
    return out
