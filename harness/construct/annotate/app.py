"""The annotation web app: one dialogue and its candidates at a time, ranked 1..N."""

from __future__ import annotations

import json
import random
import re
from importlib import resources
from typing import Any
from urllib.parse import quote

from aiohttp import web

from harness.construct.annotate.store import RankingConflict, RankingStore
from harness.core.dataset import Dataset, Item

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _.\-]{0,39}$")
DATASET = web.AppKey("dataset", Dataset)
STORE = web.AppKey("store", RankingStore)
LABELS = "ABCDEFGHIJ"


class BadRequest(web.HTTPBadRequest):
    def __init__(self, reason: str) -> None:
        text = json.dumps({"error": reason}, ensure_ascii=False)
        super().__init__(text=text, content_type="application/json")


class Conflict(web.HTTPConflict):
    def __init__(self, reason: str) -> None:
        text = json.dumps({"error": reason}, ensure_ascii=False)
        super().__init__(text=text, content_type="application/json")


def valid_name(raw: object) -> str:
    if not isinstance(raw, str) or not NAME.match(raw.strip()):
        raise BadRequest(
            "annotator name: 1-40 letters, digits, spaces, '_', '.' or '-', starting with a "
            "letter or digit"
        )
    return raw.strip()


def presentation_order(annotator: str, item: Item) -> list[str]:
    """The candidates in the order this annotator sees them: shuffled, but the same on every
    visit, so a reload shows the same page."""
    order = list(item.candidates)
    random.Random(f"annotate:{annotator}:{item.id}").shuffle(order)
    return order


def item_view(
    dataset: Dataset, annotator: str, item: Item, audio_base: str = "/audio/"
) -> dict[str, Any]:
    return {
        "id": item.id,
        "dialogue": [{"speaker": t.speaker, "text": t.text} for t in item.dialogue],
        "candidates": [
            {
                "label": LABELS[i] if i < len(LABELS) else str(i + 1),
                "clip": cid,
                "audio": audio_base + quote(cid, safe=""),
                "caption": dataset.clips[cid].caption,
            }
            for i, cid in enumerate(presentation_order(annotator, item))
        ],
    }


def static_page(name: str) -> web.Response:
    page = resources.files("harness.construct.annotate").joinpath(f"static/{name}")
    return web.Response(text=page.read_text("utf-8"), content_type="text/html")


async def index(request: web.Request) -> web.Response:
    return static_page("index.html")


async def next_item(request: web.Request) -> web.Response:
    dataset, store = request.app[DATASET], request.app[STORE]
    annotator = valid_name(request.query.get("annotator"))
    done = store.done(annotator)
    pending = [item for item in dataset.items if item.id not in done]
    body = {
        "annotator": annotator,
        "done": len(dataset.items) - len(pending),
        "total": len(dataset.items),
        "item": item_view(dataset, annotator, pending[0]) if pending else None,
    }
    return web.json_response(body)


async def json_body(request: web.Request) -> dict[str, Any]:
    """The request's JSON object; BadRequest for another type, charset, malformed JSON or
    JSON that is not an object."""
    if request.content_type != "application/json":
        raise BadRequest("send application/json")
    if (request.charset or "utf-8").lower().replace("_", "-") not in ("utf-8", "utf8"):
        raise BadRequest("send UTF-8")
    raw = await request.read()
    try:
        body = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):  # not UTF-8, not JSON, nested too deep
        raise BadRequest("the body is not valid JSON") from None
    if not isinstance(body, dict):
        raise BadRequest("expected a JSON object")
    return body


def checked_ranking(body: dict[str, Any], item: Item) -> list[str]:
    ranking = body.get("ranking")
    if not isinstance(ranking, list) or not all(isinstance(c, str) for c in ranking):
        ranking = None
    if ranking is None or sorted(ranking) != sorted(item.candidates):
        raise BadRequest(
            f"the ranking must list each of the {len(item.candidates)} candidates exactly once"
        )
    return list(ranking)


async def submit(request: web.Request) -> web.Response:
    dataset, store = request.app[DATASET], request.app[STORE]
    body = await json_body(request)
    annotator = valid_name(body.get("annotator"))
    item_id = body.get("item_id")
    if not isinstance(item_id, str) or item_id not in {i.id for i in dataset.items}:
        raise BadRequest(f"unknown item {str(item_id)[:60]!r}")
    item = dataset.item(item_id)
    ranking = checked_ranking(body, item)
    try:
        created = store.save(annotator, item_id, ranking, presentation_order(annotator, item))
    except RankingConflict:
        raise Conflict(f"{annotator} already ranked {item_id}; a stored ranking is final") from None
    done = len(store.done(annotator))
    return web.json_response(
        {"saved": created, "done": done, "total": len(dataset.items)},
        status=201 if created else 200,
    )


async def progress(request: web.Request) -> web.Response:
    store = request.app[STORE]
    return web.json_response(
        {"total": len(request.app[DATASET].items), "annotators": store.progress()}
    )


def clip_file(dataset: Dataset | None, clip_id: str) -> web.FileResponse:
    clip = dataset.clips.get(clip_id) if dataset else None
    if clip is None or not clip.has_audio or not clip.path.is_file():
        raise web.HTTPNotFound(text="no such clip")
    return web.FileResponse(clip.path)


async def audio(request: web.Request) -> web.StreamResponse:
    return clip_file(request.app[DATASET], request.match_info["clip_id"])


def create_app(dataset: Dataset, store: RankingStore) -> web.Application:
    """The ranking task alone; `harness.construct.annotate.study.create_study_app` adds the study."""
    app = web.Application(client_max_size=64 * 1024)
    app[DATASET] = dataset
    app[STORE] = store
    app.router.add_get("/", index)
    app.router.add_get("/api/next", next_item)
    app.router.add_post("/api/rankings", submit)
    app.router.add_get("/api/progress", progress)
    app.router.add_get("/audio/{clip_id:.+}", audio)
    return app
