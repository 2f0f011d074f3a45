from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from harness.construct.annotate.app import create_app, presentation_order
from harness.construct.annotate.export import export_annotations
from harness.construct.annotate.store import RankingConflict, RankingStore
from harness.core.dataset import load_dataset
from harness.core.errors import DatasetError, HarnessError
from tests.conftest import write_tiny_dataset

Scenario = Callable[[TestClient[Any, Any]], Awaitable[None]]


def unannotated(root: Path) -> Path:
    """The tiny dataset without rankings, as stage 3 writes it."""
    lines = (root / "items.jsonl").read_text().splitlines()
    items = [{k: v for k, v in json.loads(line).items() if k != "human_ranking"} for line in lines]
    (root / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    return root


def run_app(dataset_dir: Path, db: Path, scenario: Scenario) -> None:
    async def main() -> None:
        store = RankingStore(db, load_dataset(dataset_dir))
        try:
            async with TestClient(
                TestServer(create_app(load_dataset(dataset_dir), store))
            ) as client:
                await scenario(client)
        finally:
            store.close()

    asyncio.run(main())


def test_store_keeps_rankings_final(tiny_dataset: Path, tmp_path: Path) -> None:
    dataset = load_dataset(tiny_dataset)
    store = RankingStore(tmp_path / "r.sqlite", dataset)
    assert store.save("ann", "d0", ["a", "b"], ["b", "a"]) is True
    assert store.save("ann", "d0", ["a", "b"], ["b", "a"]) is False  # a retried request
    with pytest.raises(RankingConflict):
        store.save("ann", "d0", ["b", "a"], ["b", "a"])
    assert store.save("other", "d0", ["b", "a"], ["a", "b"]) is True
    store.close()
    reopened = RankingStore(tmp_path / "r.sqlite", dataset)  # survives a restart
    stored = reopened.get("ann", "d0")
    assert stored is not None and stored.ranking == ("a", "b") and stored.presented == ("b", "a")
    assert reopened.progress() == {"ann": 1, "other": 1}
    reopened.close()
    smaller = dataset.subset(["d0", "d1"])
    with pytest.raises(HarnessError, match="different dataset"):
        RankingStore(tmp_path / "r.sqlite", smaller)


def test_next_submit_resume_and_validation(tiny_dataset: Path, tmp_path: Path) -> None:
    dataset_dir = unannotated(tiny_dataset)
    dataset = load_dataset(dataset_dir)
    first = dataset.items[0]

    async def scenario(client: TestClient[Any, Any]) -> None:
        page = await client.get("/")
        assert page.status == 200 and "Submit ranking" in await page.text()
        body = await (await client.get("/api/next", params={"annotator": "alice"})).json()
        assert body["done"] == 0 and body["total"] == 3 and body["item"]["id"] == "d0"
        shown = [c["clip"] for c in body["item"]["candidates"]]
        assert shown == presentation_order("alice", first) and sorted(shown) == sorted(
            first.candidates
        )
        assert body["item"]["candidates"][0]["label"] == "A"
        audio = await client.get(body["item"]["candidates"][0]["audio"])
        assert audio.status == 200 and (await audio.read())[:4] == b"RIFF"
        assert (await client.get("/audio/nope")).status == 404

        good = {"annotator": "alice", "item_id": "d0", "ranking": list(first.candidates)}
        saved = await client.post("/api/rankings", json=good)
        assert saved.status == 201 and (await saved.json())["done"] == 1
        assert (await client.post("/api/rankings", json=good)).status == 200  # idempotent
        changed = {**good, "ranking": list(first.candidates)[::-1]}
        conflict = await client.post("/api/rankings", json=changed)
        assert conflict.status == 409 and "final" in (await conflict.json())["error"]
        body = await (await client.get("/api/next", params={"annotator": "alice"})).json()
        assert body["item"]["id"] == "d1" and body["done"] == 1
        other = await (await client.get("/api/next", params={"annotator": "bob"})).json()
        assert other["item"]["id"] == "d0"

        bad_cases: list[dict[str, Any]] = [
            {**good, "ranking": list(first.candidates)[:3]},
            {**good, "ranking": [first.candidates[0]] * 4},
            {**good, "ranking": "c0_0,c0_1"},
            {**good, "item_id": "nope"},
            {**good, "annotator": ""},
            {**good, "annotator": "<script>"},
            {**good, "annotator": 7},
        ]
        for bad in bad_cases:
            response = await client.post("/api/rankings", json=bad)
            assert response.status == 400, bad
            assert "error" in await response.json()
        as_form = await client.post("/api/rankings", data={"annotator": "alice"})
        assert as_form.status == 400
        not_json = await client.post(
            "/api/rankings", data="{", headers={"Content-Type": "application/json"}
        )
        assert not_json.status == 400
        assert (await client.get("/api/next", params={"annotator": " "})).status == 400
        progress = await (await client.get("/api/progress")).json()
        assert progress == {"total": 3, "annotators": {"alice": 1}}

    run_app(dataset_dir, tmp_path / "db.sqlite", scenario)
    rows = (
        sqlite3.connect(tmp_path / "db.sqlite")
        .execute("SELECT annotator, item_id FROM rankings")
        .fetchall()
    )
    assert rows == [("alice", "d0")]


def test_export_into_items_for_stage4(tiny_dataset: Path, tmp_path: Path) -> None:
    dataset_dir = unannotated(tiny_dataset)
    dataset = load_dataset(dataset_dir)
    store = RankingStore(tmp_path / "db.sqlite", dataset)
    for item in dataset.items:
        order = list(item.candidates)
        store.save("bob", item.id, order, order)
        store.save("alice", item.id, order[::-1], order)
    before = (dataset_dir / "items.jsonl").read_bytes()
    out = tmp_path / "exported"
    with pytest.raises(HarnessError, match="never rewritten"):
        export_annotations(dataset_dir, store, dataset_dir)
    counts = export_annotations(dataset_dir, store, out)
    assert (dataset_dir / "items.jsonl").read_bytes() == before  # the dataset is untouched
    assert counts == {
        "items": 3,
        "items_with_annotations": 3,
        "rankings": 6,
        "annotators": ["alice", "bob"],
    }
    exported = load_dataset(out)  # a complete dataset: its audio is there
    first = exported.items[0]
    assert first.annotations == (tuple(first.candidates[::-1]), tuple(first.candidates))
    assert first.model_extra["annotators"] == ["alice", "bob"]  # type: ignore[index]
    assert (out / "audio" / "c0_0.wav").read_bytes() == (
        dataset_dir / "audio" / "c0_0.wav"
    ).read_bytes()
    # Exporting again changes nothing; a conflicting ranking in the dataset is refused.
    written = (out / "items.jsonl").read_bytes()
    export_annotations(dataset_dir, store, out)
    assert (out / "items.jsonl").read_bytes() == written
    lines = [json.loads(line) for line in written.decode().splitlines()]
    lines[0]["annotations"][0] = list(first.candidates)
    (dataset_dir / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in lines))
    with pytest.raises(DatasetError, match="differs from the database"):
        export_annotations(dataset_dir, store, out)
    store.close()


def test_exported_rankings_feed_stage4(tiny_dataset: Path, tmp_path: Path) -> None:
    from harness.construct.stage4 import run_stage4

    dataset_dir = unannotated(tiny_dataset)
    dataset = load_dataset(dataset_dir)
    store = RankingStore(tmp_path / "db.sqlite", dataset)
    for item in dataset.items:
        best = list(item.candidates)
        store.save("ann1", item.id, best, best)
        store.save("ann2", item.id, best, best)
        # On the last item, ann3 ranks the other way round: W = 1/9, so stage 4 drops it.
        store.save("ann3", item.id, best[::-1] if item.id == "d2" else best, best)
    export_annotations(dataset_dir, store, tmp_path / "annotated")
    store.close()
    report = run_stage4(tmp_path / "annotated", tmp_path / "final")
    final = load_dataset(tmp_path / "final")
    assert final.items[0].human_ranking == final.items[0].candidates
    assert report["w_before_filtering"]["count"] == 3 and report["n_kept"] == 2
    assert [i.id for i in final.items] == ["d0", "d1"]


def run_study(dataset_dir: Path, db: Path, study: Any, scenario: Scenario) -> None:
    from harness.construct.annotate.study import create_study_app

    async def main() -> None:
        data = load_dataset(dataset_dir)
        store = RankingStore(db, data)
        try:
            async with TestClient(TestServer(create_study_app(data, store, study))) as client:
                await scenario(client)
        finally:
            store.close()

    asyncio.run(main())


def test_study_guidelines_practice_and_completion_code(tiny_dataset: Path, tmp_path: Path) -> None:
    from harness.construct.annotate.study import Study

    dataset_dir = unannotated(tiny_dataset)
    practice = load_dataset(write_tiny_dataset(tmp_path / "practice", n_items=2, seconds=0.1))
    study = Study(guidelines="Rank calmly.", practice=practice, admin_key="admin-key")
    dataset = load_dataset(dataset_dir)

    async def scenario(client: TestClient[Any, Any]) -> None:
        state = await (await client.get("/api/session", params={"annotator": "ann"})).json()
        assert state["guidelines"] == "Rank calmly." and not state["guidelines_read"]
        assert state["practice_pending"] == 2 and state["completion_code"] is None
        assert (await client.post("/api/guidelines", json={"annotator": "ann"})).status == 200
        body = await (await client.get("/api/practice/next", params={"annotator": "ann"})).json()
        item = body["item"]
        assert body == {"done": 0, "total": 2, "item": item} and item["id"] == "d0"
        clip = await client.get(item["candidates"][0]["audio"])
        assert clip.status == 200 and item["candidates"][0]["audio"].startswith("/practice-audio/")
        ranking = [c["clip"] for c in item["candidates"]]
        answer = await client.post(
            "/api/practice", json={"annotator": "ann", "item_id": "d0", "ranking": ranking}
        )
        labels = {c["clip"]: c["label"] for c in item["candidates"]}
        reference = [labels[c] for c in practice.item("d0").human_ranking or ()]
        assert answer.status == 201 and (await answer.json())["reference"] == reference
        bad = {"annotator": "ann", "item_id": "d9", "ranking": ranking}
        assert (await client.post("/api/practice", json=bad)).status == 400
        await client.post(
            "/api/practice",
            json={
                "annotator": "ann",
                "item_id": "d1",
                "ranking": list(practice.items[1].candidates),
            },
        )
        for entry in dataset.items:
            post = {"annotator": "ann", "item_id": entry.id, "ranking": list(entry.candidates)}
            assert (await client.post("/api/rankings", json=post)).status == 201
        state = await (await client.get("/api/session", params={"annotator": "ann"})).json()
        assert state["guidelines_read"] and state["practice_pending"] == 0
        code = state["completion_code"]
        assert isinstance(code, str) and len(code) == 10
        assert (await client.get("/admin")).status == 403
        assert (await client.get("/api/admin", params={"key": "wrong"})).status == 403
        admin = await (await client.get("/api/admin", params={"key": "admin-key"})).json()
        assert admin["annotators"][0] | {"last_submitted_at": None, "guidelines_read_at": None} == {
            "annotator": "ann",
            "guidelines_read_at": None,
            "practice_done": 2,
            "done": 3,
            "last_submitted_at": None,
            "finished": True,
            "completion_code": code,
        }
        assert admin["items_by_rankings"] == {"1": 3}
        page = await client.get("/admin", params={"key": "admin-key"})
        assert page.status == 200 and "Annotation progress" in await page.text()

    run_study(dataset_dir, tmp_path / "db.sqlite", study, scenario)
    # Practice rankings are never exported; the code is the same after a restart.
    store = RankingStore(tmp_path / "db.sqlite", dataset)
    export_annotations(dataset_dir, store, tmp_path / "out")
    from harness.construct.annotate.study import completion_code

    assert completion_code(study, store, "ann") == completion_code(study, store, "ann")
    assert completion_code(study, store, "ann") != completion_code(study, store, "bob")
    store.close()
    exported = load_dataset(tmp_path / "out")
    assert all(len(item.annotations or ()) == 1 for item in exported.items)


def test_study_token_and_fixed_completion_code(tiny_dataset: Path, tmp_path: Path) -> None:
    from harness.construct.annotate.study import TOKEN_COOKIE, Study

    study = Study(
        token="s3cret", completion_code="C0DE", completion_url="https://x.test/?cc={code}"
    )
    dataset_dir = unannotated(tiny_dataset)

    async def scenario(client: TestClient[Any, Any]) -> None:
        assert (await client.get("/")).status == 403
        assert (await client.get("/api/progress", params={"token": "nope"})).status == 403
        page = await client.get("/", params={"token": "s3cret"})
        assert page.status == 200 and page.cookies[TOKEN_COOKIE].value == "s3cret"
        # The cookie carries it from now on (the page's own requests).
        assert (await client.get("/api/progress")).status == 200
        client.session.cookie_jar.clear()
        assert (await client.get("/api/progress")).status == 403
        token = {"token": "s3cret"}
        await client.post("/api/guidelines", params=token, json={"annotator": "ann"})
        for entry in load_dataset(dataset_dir).items:
            post = {"annotator": "ann", "item_id": entry.id, "ranking": list(entry.candidates)}
            await client.post("/api/rankings", params={"token": "s3cret"}, json=post)
        state = await (
            await client.get("/api/session", params={"annotator": "ann", "token": "s3cret"})
        ).json()
        assert state["completion_code"] == "C0DE"
        assert state["completion_url"] == "https://x.test/?cc=C0DE"

    run_study(dataset_dir, tmp_path / "db.sqlite", study, scenario)


def test_clip_ids_are_url_encoded(tiny_dataset: Path, tmp_path: Path) -> None:
    odd = "c0 0/é#?&%"
    for name in ("clips.jsonl", "items.jsonl"):
        path = tiny_dataset / name
        path.write_text(path.read_text().replace('"c0_0"', json.dumps(odd)))
    dataset_dir = unannotated(tiny_dataset)

    async def scenario(client: TestClient[Any, Any]) -> None:
        body = await (await client.get("/api/next", params={"annotator": "ann"})).json()
        (url,) = [c["audio"] for c in body["item"]["candidates"] if c["clip"] == odd]
        assert url == "/audio/c0%200%2F%C3%A9%23%3F%26%25"
        response = await client.get(url)
        assert response.status == 200 and (await response.read())[:4] == b"RIFF"

    run_app(dataset_dir, tmp_path / "db.sqlite", scenario)
