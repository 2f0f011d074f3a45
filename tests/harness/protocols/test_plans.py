"""What a run's calls cost besides the call itself: work that depends on the run, not on the
item (the template's hash, the provider's identity), is done once per run."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import harness.calls.prompting.templates as prompts
from harness.config.experiment import ExperimentConfig, provider_config
from harness.config.inputs import Inputs
from providers.mock import MockJudge
from tests.conftest import run_config, write_tiny_dataset


def test_a_run_hashes_each_template_and_asks_the_identity_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hashed: Counter[str] = Counter()
    real_hash = prompts.template_hash

    def counting_hash(name: str, directory: Path | None = None) -> str:
        hashed[name] += 1
        return real_hash(name, directory)

    identities = 0
    real_identity = MockJudge.identity

    def counting_identity(self: MockJudge) -> dict[str, Any]:
        nonlocal identities
        identities += 1
        return real_identity(self)

    monkeypatch.setattr(prompts, "template_hash", counting_hash)
    monkeypatch.setattr(MockJudge, "identity", counting_identity)
    dataset = write_tiny_dataset(tmp_path / "dataset", n_items=5)
    config = ExperimentConfig(
        name="once",
        dataset=dataset,
        provider=provider_config(name="mock"),
        inputs=Inputs(dialogue="full", music="caption"),
        repeats=3,
        n_bootstrap=10,
    )
    result, records = run_config(config, tmp_path / "work")
    assert len(records) == result.stats.calls == 5 * 4 * 3
    assert hashed == Counter({"zero_shot.jinja": 1})
    assert identities == 1
