"""CONTRIBUTING.md's recipes are the code: each fenced block that opens with its file name
(`# NAME.py`, `{# prompts/NAME.jinja #}`) is written to a temporary folder, the modules are
imported (which registers what they add), and one sweep uses the metric, the protocol, the
provider and the prompt variant they add; the registries are restored afterwards."""

from __future__ import annotations

import importlib
import json
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import harness
from harness.calls.prompting import templates
from harness.calls.prompting.variants import VARIANTS
from harness.config.protocols import PROTOCOLS
from harness.scoring import registry
from providers import REGISTRY
from tests.conftest import write_tiny_dataset

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"```(python|jinja)\n(?:# (\S+\.py)|\{# (\S+\.jinja) #\})\n(.*?)```", re.S)


def recipes() -> dict[str, str]:
    """File name -> its text, of every named block of CONTRIBUTING.md."""
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    return {m[2] or m[3]: m[4] for m in BLOCK.finditer(text)}


@pytest.fixture
def restored() -> Iterator[None]:
    metrics, protocols = dict(registry.METRICS), dict(PROTOCOLS)
    providers, variants = dict(REGISTRY), dict(VARIANTS)
    yield
    for table, before in ((registry.METRICS, metrics), (PROTOCOLS, protocols)):
        table.clear()
        table.update(before)  # type: ignore[arg-type]
    for other, kept in ((REGISTRY, providers), (VARIANTS, variants)):
        other.clear()
        other.update(kept)  # type: ignore[arg-type]
    templates.reload_templates()


def test_contributing_has_a_recipe_per_registry() -> None:
    assert set(recipes()) == {
        "top_relevant.py",
        "echo_protocol.py",
        "length_scorer.py",
        "prompts/brief.jinja",
        "brief_variant.py",
    }


@pytest.mark.usefixtures("restored")
def test_the_recipes_add_a_metric_a_protocol_a_provider_and_a_prompt_variant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prompts = tmp_path / "prompts"
    shutil.copytree(templates.prompts_dir(), prompts)
    code = tmp_path / "code"
    for name, text in recipes().items():
        path = (tmp_path if name.startswith("prompts/") else code) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    monkeypatch.setenv("BGM_JUDGE_PROMPTS", str(prompts))
    monkeypatch.syspath_prepend(str(code))
    for module in ("top_relevant", "echo_protocol", "length_scorer", "brief_variant"):
        monkeypatch.delitem(sys.modules, module, raising=False)
        importlib.import_module(module)
    templates.reload_templates()

    dataset = write_tiny_dataset(tmp_path / "data", n_items=4)
    results = tmp_path / "results"
    runs = harness.run(
        {
            "name": "recipes",
            "dataset": str(dataset),
            "protocol": "echo",
            "providers": [{"name": "length"}, {"name": "mock"}],
            "prompts": ["brief"],
            "inputs": {"dialogue": "full", "music": "caption"},
            "n_bootstrap": 20,
        },
        results_dir=results,
        cache_dir=tmp_path / "cache",
        show_progress=False,
    )
    scorer, judge = runs
    assert (scorer.config.protocol, judge.config.protocol) == ("echo", "rank")
    assert judge.config.prompt == "brief" and judge.stats.parse_failures == 0
    for run in runs:
        metrics = json.loads((run.out_dir / "metrics.json").read_text())
        assert metrics["coverage"] == 1.0 and "top_relevant" in metrics["metrics"]
        assert "TopRel" in (run.out_dir / "report.md").read_text()
    metrics = json.loads((scorer.out_dir / "metrics.json").read_text())
    assert metrics["echo"] == {"records": 4, "candidates": 16}
    assert "## Echo" in (scorer.out_dir / "report.md").read_text()
    assert "## Echo" in (results / "recipes" / "comparison.md").read_text()
