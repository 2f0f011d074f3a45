"""Plugins through entry points (`harness.core.plugins`): a package's `bgm_judge.*` entry
points add providers, prompt variants, metrics and protocols, read at a registry's first
listing or at a miss; a broken one is one warning naming it, the others load.

The fast tests put a distribution's metadata (a `.dist-info` with its `entry_points.txt`) on
a temporary sys.path: `importlib.metadata` reads it as it reads an installed package. The
slow one installs a throwaway package from its pyproject.toml with uv and runs it through
`harness list` and `harness run`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from harness.calls.prompting.variants import VARIANTS
from harness.config.protocols import PROTOCOLS
from harness.core.errors import PluginWarning
from harness.core.plugins import Registry
from harness.scoring.registry import METRICS
from providers import REGISTRY

ECHO = textwrap.dedent(
    '''
    from pathlib import Path

    from harness.calls.prompting.variants import POINTWISE_SCHEMA, PromptVariant
    from harness.core.types import ScoreRequest
    from harness.scoring.registry import register_metric
    from providers.base import Scorer


    class EchoScorer(Scorer):
        """Prefers the candidates listed first."""

        async def score(self, request: ScoreRequest) -> list[float]:
            return [-float(i) for i in range(len(request.candidates))]


    @register_metric("first_relevant", "1st-rel")
    def first_relevant(block, k):
        return (block.sorted.gains[:, 0] > 0).astype(float)


    BRIEF = PromptVariant(
        "brief", "brief.jinja", response_schema=POINTWISE_SCHEMA, folder=Path(__file__).parent
    )
    '''
)
BRIEF = (
    '{% block system %}Pick music.{% endblock %}\n{% block user %}{% include "_dialogue.jinja" %}'
    '\n{% include "_clip.jinja" %}\nAnswer with JSON: {"score": 7.5}{% endblock %}\n'
)
ENTRY_POINTS = {
    "bgm_judge.providers": {"echo": "echo_plugin:EchoScorer"},
    "bgm_judge.metrics": {"first_relevant": "echo_plugin:first_relevant"},
    "bgm_judge.prompts": {"brief": "echo_plugin:BRIEF"},
}
REGISTRIES: tuple[Registry[Any], ...] = (REGISTRY, METRICS, VARIANTS, PROTOCOLS)


def write_package(root: Path, entry_points: Mapping[str, Mapping[str, str]]) -> Path:
    """The plugin's source: its module, its template, and a pyproject.toml declaring them."""
    module = root / "echo_plugin"
    module.mkdir(parents=True)
    (module / "__init__.py").write_text(ECHO)
    (module / "brief.jinja").write_text(BRIEF)
    groups = "".join(
        f'\n[project.entry-points."{group}"]\n'
        + "".join(f'{name} = "{value}"\n' for name, value in points.items())
        for group, points in entry_points.items()
    )
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=69"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "bgm-judge-echo"\nversion = "0.1"\n'
        '[tool.setuptools.package-data]\necho_plugin = ["*.jinja"]\n' + groups
    )
    return root


def put_metadata(site: Path, entry_points: Mapping[str, Mapping[str, str]]) -> None:
    """What an installer leaves beside the package: a .dist-info with entry_points.txt."""
    shutil.copytree(write_package(site / "src", entry_points) / "echo_plugin", site / "echo_plugin")
    info = site / "bgm_judge_echo-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bgm-judge-echo\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "".join(
            f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in points.items())
            for group, points in entry_points.items()
        )
    )


@pytest.fixture
def plugin_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A temporary sys.path entry for a plugin's metadata; the registries forget what they
    read from it afterwards, and what importing it registered by the way (the plugin's
    module registers its metric even when only its provider was asked for)."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    for registry in REGISTRIES:
        registry.forget_plugins()
    before = [set(registry._entries) for registry in REGISTRIES]
    yield site
    for registry, names in zip(REGISTRIES, before, strict=True):
        registry.forget_plugins()
        for name in set(registry._entries) - names:
            del registry[name]
    sys.modules.pop("echo_plugin", None)


def test_a_built_in_look_up_reads_no_plugin(plugin_site: Path) -> None:
    put_metadata(plugin_site, ENTRY_POINTS)
    assert REGISTRY["random"].kind == "scorer"
    assert not REGISTRY._loaded and "echo_plugin" not in sys.modules


def test_plugins_add_a_provider_a_metric_and_a_prompt_variant(plugin_site: Path) -> None:
    put_metadata(plugin_site, ENTRY_POINTS)
    assert REGISTRY["echo"].kind == "scorer"  # a miss reads the plugins
    assert REGISTRY["echo"].summary == "Prefers the candidates listed first."
    assert REGISTRY.plugins == {"echo": "bgm-judge-echo"}
    assert "first_relevant" in [m.name for m in METRICS.values()]
    assert METRICS.plugins == {"first_relevant": "bgm-judge-echo"}
    assert VARIANTS["brief"].folder == plugin_site / "echo_plugin"
    from harness.calls.prompting.templates import PLUGIN_FOLDERS, template_hash

    assert plugin_site / "echo_plugin" in PLUGIN_FOLDERS
    assert template_hash("brief.jinja")  # found after the prompts folder


def test_a_broken_plugin_is_one_warning_and_the_others_load(plugin_site: Path) -> None:
    broken = {
        "bgm_judge.providers": {
            "gone": "no_such_module:Judge",
            "text": "echo_plugin:BRIEF",  # not a provider class
            "random": "echo_plugin:EchoScorer",  # a built-in name: the built-in stays
            "echo": "echo_plugin:EchoScorer",
        },
        "bgm_judge.prompts": {"other": "echo_plugin:BRIEF"},  # registered as 'brief'
    }
    put_metadata(plugin_site, broken)
    with pytest.warns(PluginWarning) as caught:
        names = set(REGISTRY)
    assert "echo" in names and "gone" not in names and "text" not in names
    assert REGISTRY["random"].target.startswith("providers.")
    lines = sorted(str(w.message) for w in caught)
    assert len(lines) == 3 and all(line.startswith("plugin bgm-judge-echo (") for line in lines)
    assert "gone = no_such_module:Judge) left out: ModuleNotFoundError" in lines[0]
    assert (
        "random = echo_plugin:EchoScorer) left out: LookupError: 'random' is registered already"
        in lines[1]
    )
    assert "text = echo_plugin:BRIEF) left out: TypeError" in lines[2]
    with pytest.warns(PluginWarning, match="it names 'brief', not 'other'"):
        assert "other" not in VARIANTS


@pytest.mark.slow
def test_an_installed_plugin_is_listed_and_run(tmp_path: Path) -> None:
    """A throwaway package installed from its pyproject.toml (uv, into a target folder on
    PYTHONPATH: the venv is left as it was) adds a provider, a metric and a prompt
    variant that `harness list` shows and a run uses."""
    uv = shutil.which("uv") or shutil.which("uv", path=str(Path(sys.executable).parent))
    if uv is None:
        pytest.skip("uv (the installer `make install` uses) is not on PATH")
    source = write_package(tmp_path / "src", ENTRY_POINTS)
    site = tmp_path / "site"
    install = [uv, "pip", "install", "--quiet", "--offline", "--no-build-isolation"]
    subprocess.run(
        [*install, "--python", sys.executable, "--target", str(site), str(source)], check=True
    )
    env = {**os.environ, "PYTHONPATH": str(site)}

    def harness(*args: str) -> str:
        command = [str(Path(sys.executable).parent / "harness"), *args]
        done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def listed(what: str) -> list[str]:
        return [" ".join(line.split()) for line in harness("list", what).splitlines()]

    mark = "(plugin: bgm-judge-echo)"
    assert f"echo scorer · Prefers the candidates listed first. {mark}" in listed("providers")
    assert f"first_relevant 1st-rel · ranking {mark}" in listed("metrics")
    assert f"brief pointwise · brief.jinja {mark}" in listed("prompts")

    from tests.conftest import write_tiny_dataset

    dataset = write_tiny_dataset(tmp_path / "data", n_items=2)
    experiment = tmp_path / "plugin.yaml"
    experiment.write_text(
        f"name: plugin\ndataset: {dataset}\nn_bootstrap: 20\nprompts: [brief]\n"
        "providers: [{name: echo}, {name: mock}]\ninputs: {dialogue: full, music: caption}\n"
    )
    harness("run", str(experiment), "--no-progress", "--cache-dir", str(tmp_path / "cache"))
    for run in ("echo_full_caption", "mock_mock-1_brief_full_caption"):
        metrics = json.loads((tmp_path / "results" / "plugin" / run / "metrics.json").read_text())
        assert "first_relevant" in metrics["metrics"] and metrics["coverage"] == 1.0
