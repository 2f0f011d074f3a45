"""Gemini answers a wrong API key with HTTP 400 INVALID_ARGUMENT (reason API_KEY_INVALID), not
401: the run must still name GEMINI_API_KEY, count the failure as `auth` and stop sending."""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from harness.cli.main import app
from harness.fake_api import FakeServer
from tests.reliability.conftest import FAST, MakeDataset, fast_settings

CONCURRENCY = 2


def test_a_wrong_gemini_key_names_the_variable_to_check(
    make_dataset: MakeDataset, tmp_path: Path
) -> None:
    dataset = make_dataset(n_items=4)
    with FakeServer(fast_settings(api_key="the-right-key-123")) as server:
        provider = {
            "name": "gemini",
            "base_url": server.gemini_base_url,
            "max_concurrency": CONCURRENCY,
            **FAST,
        }
        experiment = tmp_path / "exp.yaml"
        experiment.write_text(
            yaml.safe_dump({"name": "g", "dataset": str(dataset), "provider": provider})
        )
        result = CliRunner().invoke(
            app,
            ["run", str(experiment), "--results-dir", str(tmp_path / "r"), "--no-progress"],
            env={"BGM_JUDGE_CACHE": str(tmp_path / "cache"), "GEMINI_API_KEY": "a-wrong-key-456"},
        )
        requests = server.stats()["requests"]
        statuses = server.stats()["status"]
    assert statuses == {"400": requests}  # what the real service answers
    assert result.exit_code == 1, result.output
    assert 1 <= requests <= CONCURRENCY  # the first refusal stops the run
    assert "auth ×" in result.stderr and "GEMINI_API_KEY" in result.stderr
    assert "check the model's settings" not in result.stderr
    assert "a-wrong-key-456" not in result.output
