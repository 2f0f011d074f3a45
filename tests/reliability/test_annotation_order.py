"""D16: the annotation server enforces the study's order, not only the page: a task ranking
is refused (409, one JSON error line, nothing stored) until the annotator has confirmed the
guidelines and ranked every practice item, and a practice ranking until the guidelines are
confirmed. Plus a fuzz of the annotation posts: any body gets a 4xx with a JSON error or is
stored, never a 500, and nothing is stored for a refused post."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.construct.annotate.store import RankingStore
from harness.construct.annotate.study import Study, create_study_app
from harness.core.dataset import load_dataset
from tests.conftest import write_tiny_dataset


def _unannotated(root: Path) -> Path:
    items = [json.loads(line) for line in (root / "items.jsonl").read_text().splitlines()]
    for item in items:
        item.pop("human_ranking", None)
    (root / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    return root


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("study")
    task = _unannotated(write_tiny_dataset(root / "task", n_items=2, seconds=0.1))
    return task, write_tiny_dataset(root / "practice", n_items=1, seconds=0.1)


def _run(folders: tuple[Path, Path], db: Path, scenario: Any) -> None:
    task, practice = folders
    data = load_dataset(task)
    study = Study(guidelines="Rank calmly.", practice=load_dataset(practice))

    async def main() -> None:
        store = RankingStore(db, data)
        try:
            async with TestClient(TestServer(create_study_app(data, store, study))) as client:
                await scenario(client, data, study, store)
        finally:
            store.close()

    asyncio.run(main())


def test_d16_task_rankings_wait_for_guidelines_and_practice(
    folders: tuple[Path, Path], tmp_path: Path
) -> None:
    async def scenario(client: TestClient[Any, Any], data: Any, study: Any, store: Any) -> None:
        item = data.items[0]
        task = {"annotator": "ann", "item_id": item.id, "ranking": list(item.candidates)}
        practice_item = study.practice.items[0]
        practice = {
            "annotator": "ann",
            "item_id": practice_item.id,
            "ranking": list(practice_item.candidates),
        }
        early = await client.post("/api/rankings", json=task)
        assert early.status == 409
        assert "guidelines" in (await early.json())["error"]
        early_practice = await client.post("/api/practice", json=practice)
        assert early_practice.status == 409
        assert store.done("ann") == set() and store.practice_done("ann") == set()
        assert (await client.post("/api/guidelines", json={"annotator": "ann"})).status == 200
        before_practice = await client.post("/api/rankings", json=task)
        assert before_practice.status == 409
        assert "practice" in (await before_practice.json())["error"]
        assert (await client.post("/api/practice", json=practice)).status == 201
        assert (await client.post("/api/rankings", json=task)).status == 201
        assert store.done("ann") == {item.id}
        # another annotator is held to the same order
        assert (await client.post("/api/rankings", json=task | {"annotator": "bob"})).status == 409

    _run(folders, tmp_path / "db.sqlite", scenario)


json_value = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5)
    ),
    max_leaves=15,
)
post = st.fixed_dictionaries(
    {},
    optional={
        "annotator": st.sampled_from(["ann", "", "x" * 50, "a/b", "ann\x00"]) | json_value,
        "item_id": st.sampled_from(["d0", "d1", "nope"]) | json_value,
        "ranking": st.lists(st.sampled_from(["c0_0", "c0_1", "c0_2", "c0_3", "c1_0"]), max_size=6)
        | json_value,
    },
)
body = st.builds(json.dumps, post | json_value) | st.binary(max_size=40).map(
    lambda raw: raw.decode("latin-1")
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    bodies=st.lists(
        st.tuples(st.sampled_from(["rankings", "practice", "guidelines"]), body), max_size=4
    )
)
@pytest.mark.slow
def test_annotation_posts_are_stored_or_refused_never_a_server_error(
    bodies: list[tuple[str, str]],
    folders: tuple[Path, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    db = tmp_path_factory.mktemp("fuzz") / "db.sqlite"

    async def scenario(client: TestClient[Any, Any], data: Any, study: Any, store: Any) -> None:
        for route, text in bodies:
            before = (len(store.all()), store.practice_done("ann"))
            answer = await client.post(
                f"/api/{route}", data=text, headers={"Content-Type": "application/json"}
            )
            assert answer.status in (200, 201, 400, 409, 413), (route, text, answer.status)
            if answer.status >= 400:
                assert "error" in await answer.json()
                assert (len(store.all()), store.practice_done("ann")) == before

    _run(folders, db, scenario)
