"""The annotation app answers bad requests with 400, never 500: a JSON body nested 30,000
deep, a charset no codec knows. Clip ids with characters that mean something in a URL
(`#`, `?`, `%2F`, `/`) get URLs that encode them, and those URLs serve the clip."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from harness.construct.annotate.app import create_app
from harness.construct.annotate.store import RankingStore
from harness.core.dataset import load_dataset
from tests.reliability.conftest import write_dataset

ODD_IDS = {"c0_0": "a#1", "c0_1": "b?2", "c0_2": "c%2F3", "c0_3": "d/4 e"}


def _serve(dataset: Path, tmp_path: Path, scenario: Callable[[Any], Awaitable[None]]) -> None:
    async def main() -> None:
        data = load_dataset(dataset)
        store = RankingStore(tmp_path / "r.sqlite", data)
        try:
            async with TestClient(TestServer(create_app(data, store))) as client:
                await scenario(client)
        finally:
            store.close()

    asyncio.run(main())


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    root = write_dataset(tmp_path / "data", n_items=2)
    for name in ("clips.jsonl", "items.jsonl"):
        text = (root / name).read_text()
        for old, new in ODD_IDS.items():
            text = text.replace(f'"{old}"', json.dumps(new))
        (root / name).write_text(text)
    return root


BAD_BODIES = {
    "nested_30000_deep": ("application/json", b"[" * 30000 + b"]" * 30000),
    "bogus_charset": ("application/json; charset=x-bogus", b'{"annotator": "ann"}'),
    "latin1_bytes_as_utf8": ("application/json", b'{"annotator": "caf\xe9"}'),
}


@pytest.mark.parametrize("case", BAD_BODIES)
def test_a_malformed_body_is_400(case: str, dataset: Path, tmp_path: Path) -> None:
    content_type, body = BAD_BODIES[case]

    async def scenario(client: Any) -> None:
        response = await client.post(
            "/api/rankings", data=body, headers={"Content-Type": content_type}
        )
        assert response.status == 400, await response.text()
        assert "error" in await response.json()

    _serve(dataset, tmp_path, scenario)


def test_clip_ids_are_url_encoded_and_served(dataset: Path, tmp_path: Path) -> None:
    async def scenario(client: Any) -> None:
        item = (await (await client.get("/api/next", params={"annotator": "ann"})).json())["item"]
        urls = {c["clip"]: c["audio"] for c in item["candidates"]}
        assert urls["a#1"] == "/audio/a%231" and urls["b?2"] == "/audio/b%3F2"
        assert urls["c%2F3"] == "/audio/c%252F3" and urls["d/4 e"] == "/audio/d%2F4%20e"
        for url in urls.values():
            response = await client.get(url)
            assert response.status == 200, url
            assert (await response.read())[:4] == b"RIFF"

    _serve(dataset, tmp_path, scenario)
