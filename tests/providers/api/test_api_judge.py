"""Provenance equals the wire: for every API judge of the registry, and for an OpenAI-compatible
service added as one small module and one registry line, the base URL and the key variable
that run.json records are the ones the request actually used.

Two fake servers run: the right one, which accepts only the right key, and a decoy named by
every other URL variable (OPENAI_BASE_URL, GEMINI_BASE_URL, GOOGLE_GEMINI_BASE_URL, ...)
with a wrong key in every other key variable. A request that went to the decoy, or carried
another variable's key, is seen by the decoy or refused by the right server."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.config.experiment import ExperimentConfig
from harness.core.errors import ConfigError
from harness.fake_api import FakeServer
from providers import REGISTRY, Entry, create_provider, provider_class, provider_options
from providers.api.gemini import GeminiJudge
from providers.api.judge import ApiJudge
from tests.conftest import run_config

RIGHT_KEY = "sk-right-key-0123456789"
WRONG_KEY = "sk-wrong-key-9876543210"
API_PROVIDERS = sorted(name for name, entry in REGISTRY.items() if entry.extra == "api")
# SDK variables outside the providers' own that could redirect a client
SDK_URL_VARIABLES = ("GOOGLE_GEMINI_BASE_URL",)

ROOT = Path(__file__).resolve().parents[3]


def _recipe() -> tuple[str, dict[str, Entry]]:
    """docs/providers.md's recipe for a new OpenAI-compatible service: the module, and the
    registry line (evaluated as written)."""
    text = (ROOT / "docs" / "providers.md").read_text(encoding="utf-8")
    section = text.split("## Adding an OpenAI-compatible service", 1)[1]
    module, line = re.findall(r"```python\n(.*?)```", section, flags=re.S)[:2]
    registry: dict[str, Entry] = eval("{" + line + "}", {"Entry": Entry})
    return module, registry


@pytest.fixture
def recipe_service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The recipe's module in a folder on the path, as `providers.<name>` would be, and its
    entry in the registry for the test."""
    module, registry = _recipe()
    ((name, entry),) = registry.items()
    folder = tmp_path / "contrib"
    folder.mkdir()
    module_name = entry.target.split(":")[0].rsplit(".", 1)[-1]
    (folder / f"{module_name}.py").write_text(module)
    monkeypatch.syspath_prepend(str(folder))
    target = entry.target.replace(entry.target.split(":")[0], module_name)
    monkeypatch.setitem(REGISTRY, name, Entry(target, entry.kind, entry.summary, entry.extra))
    yield name


@pytest.fixture
def decoy() -> Iterator[FakeServer]:
    with FakeServer() as fake:
        yield fake


def _url(server: FakeServer, cls: type[ApiJudge[Any]]) -> str:
    return server.gemini_base_url if issubclass(cls, GeminiJudge) else server.openai_base_url


def _every_api_class() -> list[type[ApiJudge[Any]]]:
    classes = [provider_class(name) for name in REGISTRY if REGISTRY[name].extra == "api"]
    return [cls for cls in classes if issubclass(cls, ApiJudge)]


def _decoy_environment(
    monkeypatch: pytest.MonkeyPatch, decoy: FakeServer, cls: type[ApiJudge[Any]]
) -> None:
    """Every URL variable points at the decoy and every key variable holds a wrong key."""
    for other in _every_api_class():
        monkeypatch.setenv(other.url_variable, _url(decoy, other))
        for name in other.key_variables:
            monkeypatch.setenv(name, WRONG_KEY)
    for name in SDK_URL_VARIABLES:
        monkeypatch.setenv(name, _url(decoy, cls))
    monkeypatch.setenv(cls.url_variable, _url(decoy, cls))
    for name in cls.key_variables:
        monkeypatch.setenv(name, WRONG_KEY)


def _run_one(name: str, block: dict[str, Any], dataset: Path, workdir: Path) -> dict[str, Any]:
    """Run one item through provider `name`; run.json's provider endpoint."""
    provider = {"name": name, "retry_wait_s": 0.01, "max_retry_time_s": 1.0, **block}
    if name == "openai-compatible":
        provider.setdefault("model", "Qwen/Qwen2.5-Omni-7B")
    config = ExperimentConfig.model_validate(
        {"name": "wire", "dataset": str(dataset), "provider": provider, "limit": 1}
    )
    result, _ = run_config(config, workdir)
    assert result.stats.errors == 0, (workdir / "results" / "wire" / "records.jsonl").read_text()
    run = json.loads((result.out_dir / "run.json").read_text())
    endpoint: dict[str, Any] = run["provenance"]["endpoints"]["provider"]
    return endpoint


def check_provenance_is_the_wire(
    name: str,
    where: str,
    server: FakeServer,
    decoy: FakeServer,
    dataset: Path,
    workdir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cls = provider_class(name)
    assert issubclass(cls, ApiJudge)
    _decoy_environment(monkeypatch, decoy, cls)
    server.configure(api_key=RIGHT_KEY)
    right = _url(server, cls)
    if where == "environment":  # the class's own variables
        monkeypatch.setenv(cls.url_variable, right)
        key_variable, block = cls.key_variables[-1], {}
    else:  # the experiment file names the URL and the key's variable
        key_variable, block = "BGM_WIRE_TEST_KEY", {"base_url": right}
        block["api_key_env"] = key_variable
    monkeypatch.setenv(key_variable, RIGHT_KEY)
    if where == "environment":
        for earlier in cls.key_variables[:-1]:  # the first one set wins: leave only the last
            monkeypatch.delenv(earlier)
    endpoint = _run_one(name, block, dataset, workdir)
    arrived = server.requests()
    assert arrived and decoy.requests() == []
    assert all(entry.status == 200 and entry.key_present for entry in arrived)  # the right key
    host = {entry.headers["host"] for entry in arrived}
    assert host == {f"{server.host}:{server.port}"}
    assert endpoint["base_urls"] == [right]
    assert all(entry.path.startswith(right.removeprefix(server.url)) for entry in arrived)
    assert endpoint["source"] == (
        cls.url_variable if where == "environment" else "provider.base_url"
    )
    assert endpoint["api_key_env"] == key_variable


@pytest.mark.slow
@pytest.mark.parametrize("where", ["environment", "experiment file"])
@pytest.mark.parametrize("name", API_PROVIDERS)
def test_run_json_records_the_url_and_key_the_request_used(
    name: str,
    where: str,
    server: FakeServer,
    decoy: FakeServer,
    tiny_dataset: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    check_provenance_is_the_wire(name, where, server, decoy, tiny_dataset, tmp_path, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("where", ["environment", "experiment file"])
def test_the_docs_recipe_for_a_new_service_is_one_small_module_and_one_line(
    where: str,
    recipe_service: str,
    server: FakeServer,
    decoy: FakeServer,
    tiny_dataset: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module, registry = _recipe()
    assert len(module.splitlines()) < 40 and len(registry) == 1
    assert registry[recipe_service].extra == "api"  # so the registry-wide test takes it too
    check_provenance_is_the_wire(
        recipe_service, where, server, decoy, tiny_dataset, tmp_path, monkeypatch
    )


def _client_url(client: Any) -> str:
    """The base URL an SDK client was built to send to."""
    if hasattr(client, "_api_client"):  # google-genai
        return str(client._api_client._http_options.base_url).rstrip("/")
    return str(client.base_url).rstrip("/")  # openai


@pytest.mark.parametrize("name", [*API_PROVIDERS, "the recipe's"])
def test_with_no_url_configured_the_client_is_built_for_the_url_recorded(
    name: str, recipe_service: str, decoy: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No URL in the file or the class's variable: the client goes to the official service
    (not to another SDK's variable or default), and that is the URL run.json records."""
    name = recipe_service if name == "the recipe's" else name
    cls = provider_class(name)
    assert issubclass(cls, ApiJudge)
    _decoy_environment(monkeypatch, decoy, cls)
    monkeypatch.delenv(cls.url_variable)
    monkeypatch.setenv(cls.key_variables[0], RIGHT_KEY)
    if cls.official_base_url is None:  # self-hosted: no URL of its own to fall back on
        with pytest.raises(ConfigError, match="needs the server's URL"):
            create_provider(provider_options({"name": name, "model": "m"}))
        return
    judge = create_provider(provider_options({"name": name}))
    assert isinstance(judge, ApiJudge)
    endpoint = judge.endpoint()
    client, _ = judge.batch_client()
    assert endpoint["base_urls"] == [cls.official_base_url] == [_client_url(client)]
    assert endpoint["source"] == "default" and endpoint["official"] is True
    assert endpoint["api_key_env"] == cls.key_variables[0]
