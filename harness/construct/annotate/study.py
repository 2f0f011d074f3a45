"""The study around the ranking task: guidelines each annotator confirms first, practice
items (with the reference ranking as feedback, stored apart and never exported), an access
token when the server is reachable beyond this machine, an admin progress page, and a
completion code to give a crowdsourcing platform."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from harness.construct.annotate.app import (
    DATASET,
    STORE,
    BadRequest,
    Conflict,
    checked_ranking,
    clip_file,
    create_app,
    item_view,
    json_body,
    static_page,
    valid_name,
)
from harness.construct.annotate.store import RankingStore
from harness.core.dataset import Dataset

DEFAULT_GUIDELINES = """\
You will read short everyday conversations. Each comes with several music clips.
Imagine the conversation happening in a room where one of the clips plays quietly in the background.
Listen to every clip (you can rank a clip once you have listened to it), then rank them:
1 = the best background music for this conversation, the last rank = the worst.
Good background music suits the mood and the topic of the conversation, stays in the background,
and does not compete with the voices: prominent singing or speech in a clip is a serious fault.
There are no right answers; rank by your own judgement. Each ranking is saved when you submit it
and cannot be changed afterwards. You can stop and come back at any time."""

LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
TOKEN_COOKIE = "bgm_annotate_token"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Study:
    """How a study runs: what annotators see before the task and what guards the server."""

    guidelines: str = DEFAULT_GUIDELINES
    practice: Dataset | None = None  # items ranked for practice, with a reference ranking
    min_listen_s: float = 10.0  # a clip can be ranked once played this long (or to its end)
    token: str | None = None  # required of every request when set
    admin_key: str = field(default_factory=lambda: secrets.token_urlsafe(12))
    completion_code: str | None = None  # one code for everyone (a platform's study code)
    completion_url: str | None = None  # where to send a finished annotator; {code} filled in


STUDY = web.AppKey("study", Study)


def completion_code(study: Study, store: RankingStore, annotator: str) -> str:
    """The code a finished annotator reports: the study's fixed one, else a code that only
    this database can produce for this name (shown on the admin page, to check claims)."""
    if study.completion_code:
        return study.completion_code
    digest = hmac.new(store.secret().encode(), annotator.encode(), hashlib.sha256)
    return digest.hexdigest()[:10].upper()


def access_token(study: Study) -> Any:
    """Middleware: with a token set, every request must carry it (`?token=` once, then the
    cookie the page gets); the admin routes check their own key instead."""

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        if study.token is None or request.path in ("/admin", "/api/admin"):
            return await handler(request)
        given = request.query.get("token") or request.cookies.get(TOKEN_COOKIE) or ""
        if not hmac.compare_digest(given.encode(), study.token.encode()):
            raise web.HTTPForbidden(
                text="an access token is needed: open the link you were given (it ends in ?token=...)"
            )
        response = await handler(request)
        if request.query.get("token"):
            response.set_cookie(TOKEN_COOKIE, study.token, httponly=True, samesite="Strict")
        return response

    return check


def study_order(study: Study) -> Any:
    """Middleware: the API keeps the study's order, whatever a client sends (the page keeps
    it too): a practice ranking once the annotator confirmed the guidelines, a task ranking
    once the practice items are ranked as well; 409 with a JSON error otherwise."""

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method == "POST" and request.path in ("/api/practice", "/api/rankings"):
            body = await json_body(request)  # read once; aiohttp keeps it for the handler
            annotator = valid_name(body.get("annotator"))
            store = request.app[STORE]
            missing = None
            if not store.has_read_guidelines(annotator):
                missing = "confirm the guidelines first"
            elif request.path == "/api/rankings" and _practice_pending(study, store, annotator):
                missing = "rank every practice item first"
            if missing is not None:
                raise Conflict(f"{annotator}: {missing}")
        return await handler(request)

    return check


def _practice_pending(study: Study, store: RankingStore, annotator: str) -> list[str]:
    if study.practice is None:
        return []
    done = store.practice_done(annotator)
    return [item.id for item in study.practice.items if item.id not in done]


async def session(request: web.Request) -> web.Response:
    study, store, dataset = request.app[STUDY], request.app[STORE], request.app[DATASET]
    annotator = valid_name(request.query.get("annotator"))
    done = len(store.done(annotator))
    finished = done == len(dataset.items)
    code = completion_code(study, store, annotator) if finished else None
    url = study.completion_url.replace("{code}", code) if code and study.completion_url else None
    return web.json_response(
        {
            "annotator": annotator,
            "guidelines": study.guidelines,
            "guidelines_read": store.has_read_guidelines(annotator),
            "practice_total": len(study.practice.items) if study.practice else 0,
            "practice_pending": len(_practice_pending(study, store, annotator)),
            "min_listen_s": study.min_listen_s,
            "done": done,
            "total": len(dataset.items),
            "completion_code": code,
            "completion_url": url,
        }
    )


async def guidelines(request: web.Request) -> web.Response:
    body = await json_body(request)
    annotator = valid_name(body.get("annotator"))
    request.app[STORE].read_guidelines(annotator)
    return web.json_response({"guidelines_read": True})


async def next_practice(request: web.Request) -> web.Response:
    study, store = request.app[STUDY], request.app[STORE]
    annotator = valid_name(request.query.get("annotator"))
    pending = _practice_pending(study, store, annotator)
    item = None
    if pending and study.practice is not None:
        practice = study.practice.item(pending[0])
        item = item_view(study.practice, annotator, practice, audio_base="/practice-audio/")
    total = len(study.practice.items) if study.practice else 0
    return web.json_response({"done": total - len(pending), "total": total, "item": item})


async def submit_practice(request: web.Request) -> web.Response:
    study, store = request.app[STUDY], request.app[STORE]
    body = await json_body(request)
    annotator = valid_name(body.get("annotator"))
    practice = study.practice
    item_id = body.get("item_id")
    if practice is None or item_id not in {item.id for item in practice.items}:
        raise BadRequest(f"unknown practice item {str(item_id)[:60]!r}")
    item = practice.item(str(item_id))
    store.save_practice(annotator, item.id, checked_ranking(body, item))
    shown = item_view(practice, annotator, item)["candidates"]
    label = {c["clip"]: c["label"] for c in shown}
    reference = [label[c] for c in item.human_ranking] if item.human_ranking else None
    return web.json_response({"reference": reference, "saved": True}, status=201)


async def practice_audio(request: web.Request) -> web.StreamResponse:
    return clip_file(request.app[STUDY].practice, request.match_info["clip_id"])


def _admin_key(request: web.Request) -> None:
    given = request.query.get("key", "")
    if not hmac.compare_digest(given.encode(), request.app[STUDY].admin_key.encode()):
        raise web.HTTPForbidden(text="the admin page needs ?key= (printed when the server started)")


async def admin_page(request: web.Request) -> web.Response:
    _admin_key(request)
    return static_page("admin.html")


async def admin_progress(request: web.Request) -> web.Response:
    _admin_key(request)
    study, store, dataset = request.app[STUDY], request.app[STORE], request.app[DATASET]
    total = len(dataset.items)
    annotators = store.annotators()
    for row in annotators:
        row["finished"] = row["done"] == total
        row["completion_code"] = completion_code(study, store, row["annotator"])
    per_item = Counter(stored.item_id for stored in store.all())
    coverage = Counter(str(per_item[item.id]) for item in dataset.items)
    return web.json_response(
        {
            "total": total,
            "practice_total": len(study.practice.items) if study.practice else 0,
            "annotators": annotators,
            "items_by_rankings": dict(sorted(coverage.items(), key=lambda kv: int(kv[0]))),
        }
    )


def create_study_app(dataset: Dataset, store: RankingStore, study: Study) -> web.Application:
    """The ranking task with the study around it."""
    app = create_app(dataset, store)
    app.middlewares.append(access_token(study))
    app.middlewares.append(study_order(study))
    app[STUDY] = study
    app.router.add_get("/api/session", session)
    app.router.add_post("/api/guidelines", guidelines)
    app.router.add_get("/api/practice/next", next_practice)
    app.router.add_post("/api/practice", submit_practice)
    app.router.add_get("/practice-audio/{clip_id:.+}", practice_audio)
    app.router.add_get("/admin", admin_page)
    app.router.add_get("/api/admin", admin_progress)
    return app
