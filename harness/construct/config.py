"""The build file of `harness build all` (its stage sections also serve the single stages)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from harness.construct.stage1 import Stage1Config
from harness.construct.stage2 import Stage2Config
from harness.construct.stage3 import Stage3Config
from harness.construct.stage4 import Stage4Config
from harness.core.errors import ConfigError
from harness.core.yaml_files import load_yaml
from providers import provider_options


class BuildConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    out: Path = Path("build/dialbgm")
    seed: int = 0
    musiccaps: Path | None = None
    dailydialog: Path | None = None
    audio_dir: Path | None = None
    annotated: Path | None = Field(default=None, description="annotated dataset for stage 4")
    stage1: Stage1Config = Field(default_factory=Stage1Config)
    stage2: Stage2Config = Field(default_factory=Stage2Config)
    stage3: Stage3Config = Field(default_factory=Stage3Config)
    stage4: Stage4Config = Field(default_factory=Stage4Config)

    @model_validator(mode="after")
    def _one_seed(self) -> BuildConfig:
        for name in ("stage2", "stage3"):
            if "seed" in getattr(self, name).model_fields_set:
                raise ValueError(f"{name}.seed: set the seed once, at the top (seed: N)")
        return self

    def seeded(self) -> tuple[Stage2Config, Stage3Config]:
        return (
            self.stage2.model_copy(update={"seed": self.seed}),
            self.stage3.model_copy(update={"seed": self.seed}),
        )

    def require(self, *fields: str) -> None:
        for field in fields:
            if getattr(self, field) is None:
                raise ConfigError("build file", field, "required by `harness build all`")


def load_build_config(path: Path | None) -> BuildConfig:
    """The build file at `path` (all defaults when None); errors name the field."""
    if path is None:
        return BuildConfig()
    if not path.is_file():
        raise ConfigError(path, None, "build file not found")
    raw: Any = load_yaml(path)
    if not isinstance(raw, dict):
        raise ConfigError(path, None, "expected a mapping of settings")
    stage2 = raw.get("stage2")
    if isinstance(stage2, dict) and isinstance(stage2.get("provider"), dict):
        provider = provider_options(stage2["provider"], source=path, field="stage2.provider")
        raw = {**raw, "stage2": {**stage2, "provider": provider}}
    try:
        return BuildConfig.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or None
        raise ConfigError(path, where, first["msg"].removeprefix("Value error, ")) from None
