"""Fuzz of the annotation server's posts: any body is answered 200/201 (saved), 400 (one
JSON error line) or 409 (a final ranking), never a 500 or a traceback."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer
from hypothesis import given
from hypothesis import strategies as st

from harness.construct.annotate.app import create_app
from harness.construct.annotate.store import RankingStore
from harness.core.dataset import load_dataset
from tests.conftest import write_tiny_dataset
from tests.reliability.fuzz._contract import SETTINGS, json_values

KEYS = ["annotator", "item_id", "ranking"]


def test_any_ranking_post_is_answered_without_a_server_error(tmp_path: Path) -> None:
    dataset = load_dataset(write_tiny_dataset(tmp_path / "data", 2))
    store = RankingStore(tmp_path / "db.sqlite", dataset)
    bodies = st.one_of(
        st.fixed_dictionaries(
            {
                "annotator": st.sampled_from(["alice", "", "../x", "a" * 200]) | json_values(),
                "item_id": st.sampled_from(["d0", "d1", "zz"]) | json_values(),
                "ranking": st.permutations(["c0_0", "c0_1", "c0_2", "c0_3"]).map(list)
                | json_values(KEYS),
            }
        ).map(lambda b: json.dumps(b).encode()),
        json_values(KEYS).map(lambda v: json.dumps(v).encode()),
        st.binary(max_size=40),
        st.integers(1, 20_000).map(lambda n: b"[" * n),
    )

    async def post_all(payloads: list[bytes]) -> list[int]:
        async with TestClient(TestServer(create_app(dataset, store))) as client:
            statuses = []
            for body in payloads:
                response = await client.post(
                    "/api/rankings", data=body, headers={"content-type": "application/json"}
                )
                text = await response.text()
                assert "Traceback" not in text
                statuses.append(response.status)
            return statuses

    @SETTINGS
    @given(payloads=st.lists(bodies, min_size=1, max_size=4))
    def check(payloads: list[bytes]) -> None:
        statuses = asyncio.run(post_all(payloads))
        assert set(statuses) <= {200, 201, 400, 409, 413}, statuses

    check()
    store.close() if hasattr(store, "close") else None
