"""run.json records where the numbers came from (versions, commit, times, the endpoint each
API provider called, a base URL from the environment included), and every report marks a
run whose endpoint is not the provider's official service: through the real SDKs against
the local fake API."""

from __future__ import annotations

import csv
import json
import re
from datetime import datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

import harness
from harness.cli.main import app
from harness.config.experiment import provider_config
from harness.core.provenance import unofficial_endpoints
from harness.fake_api import FakeServer
from providers import create_provider

runner = CliRunner()
# google-genai subclasses aiohttp.ClientSession, which aiohttp frowns on; nothing to act on here.
pytestmark = [
    pytest.mark.filterwarnings("ignore:Inheritance class Aiohttp:DeprecationWarning"),
    pytest.mark.usefixtures("api_keys"),
]


def run_experiment(tmp_path: Path, dataset: Path, provider: str, name: str = "t") -> Path:
    experiment = tmp_path / f"{name}.yaml"
    experiment.write_text(
        f"name: {name}\ndataset: {dataset}\nn_bootstrap: 20\n"
        f"provider: {{{provider}, max_concurrency: 4, retry_wait_s: 0.02}}\n"
    )
    args = ["run", str(experiment), "--results-dir", str(tmp_path / "results"), "--no-progress"]
    result = runner.invoke(app, [*args, "--cache-dir", str(tmp_path / "cache")])
    assert result.exit_code == 0, result.output
    return tmp_path / "results" / name


def test_run_json_records_provenance_and_the_endpoint_from_the_environment(
    tmp_path: Path, tiny_dataset: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEMINI_BASE_URL", server.url)
    folder = run_experiment(tmp_path, tiny_dataset, "name: gemini, model: gemini-2.5-flash")
    assert server.requests()  # the fake answered
    config = (folder / "config.yaml").read_text()
    assert "base_url: null" in config  # the file's setting; run.json has the effective one
    provenance = json.loads((folder / "run.json").read_text())["provenance"]
    assert provenance["endpoints"] == {
        "provider": {
            "base_urls": [server.url],
            "source": "GEMINI_BASE_URL",
            "official_base_url": "https://generativelanguage.googleapis.com",
            "official": False,
            "api_key_env": "GEMINI_API_KEY",  # the variable the request's key came from
        }
    }
    assert provenance["harness_version"] == harness.__version__
    assert re.fullmatch(r"[0-9a-f]{40}", provenance["git"]["commit"])  # tests run in a checkout
    assert isinstance(provenance["git"]["dirty"], bool)
    assert provenance["python"].startswith("3.")
    assert {"numpy", "scipy", "google-genai", "openai"} <= set(provenance["packages"])
    started = datetime.fromisoformat(provenance["started_at"])
    assert started <= datetime.fromisoformat(provenance["finished_at"])

    report = (folder / "report.md").read_text()
    assert f"endpoint provider: {server.url} (from GEMINI_BASE_URL)" in report
    assert "not the provider's official service" in report

    out = tmp_path / "report"
    result = runner.invoke(app, ["report", str(folder), "--out", str(out)])
    assert result.exit_code == 0, result.output
    markdown = (out / "comparison.md").read_text()
    assert "| t † |" in markdown and f"provider: {server.url} (from GEMINI_BASE_URL)" in markdown
    with (out / "comparison.csv").open() as handle:
        assert next(csv.DictReader(handle))["official_endpoint"] == "False"
    assert "$^\\dagger$" in (out / "comparison.tex").read_text()
    html = (out / "report.html").read_text()
    assert "endpoint-note" in html and server.url in html


def test_a_base_url_in_the_file_is_recorded_as_such_and_openai_is_marked_too(
    tmp_path: Path, tiny_dataset: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEMINI_BASE_URL", "http://ignored.invalid")  # the file's wins
    folder = run_experiment(
        tmp_path, tiny_dataset, f"name: gemini, model: gemini-2.5-flash, base_url: '{server.url}'"
    )
    endpoint = json.loads((folder / "run.json").read_text())["provenance"]["endpoints"]["provider"]
    assert endpoint["source"] == "provider.base_url" and endpoint["base_urls"] == [server.url]

    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    openai = run_experiment(tmp_path, tiny_dataset, "name: openai-audio", name="o")
    stats = json.loads((openai / "run.json").read_text())
    assert unofficial_endpoints(stats) == [f"provider: {server.url}/v1 (from OPENAI_BASE_URL)"]


def test_official_and_self_hosted_endpoints_are_not_marked(monkeypatch: pytest.MonkeyPatch) -> None:
    gemini = create_provider(provider_config("gemini", model="gemini-2.5-flash"))
    assert gemini.endpoint() == {
        "base_urls": ["https://generativelanguage.googleapis.com"],
        "source": "default",
        "official_base_url": "https://generativelanguage.googleapis.com",
        "official": True,
        "api_key_env": "GEMINI_API_KEY",
    }
    explicit = create_provider(
        provider_config("openai-audio", base_url="https://api.openai.com/v1/")
    ).endpoint()
    assert explicit is not None and explicit["official"] is True
    vllm = create_provider(
        provider_config("openai-compatible", model="m", base_url="http://gpu1:8000/v1")
    ).endpoint()
    assert vllm is not None and vllm["official"] is None  # self-hosted: nothing to compare
    assert create_provider(provider_config("random")).endpoint() is None
    stats = {"provenance": {"endpoints": {"provider": vllm}}}
    assert unofficial_endpoints(stats) == [] and unofficial_endpoints({}) == []
