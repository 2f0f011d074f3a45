"""`harness view`: the HTML report of one or several runs served live. Each page load
re-reads the results when a run was added or changed (by the files' sizes and modification
times), so a sweep can be watched while it runs; the page polls and offers a reload when the
results change. Audio is served by clip id. Standard library only.

Bound to loopback, it answers only requests whose Host header names this machine (a page of
another site that rebinds its name to 127.0.0.1 cannot read the report); with a `token` (what
`harness view` makes when bound beyond this machine) every request must carry it, `?token=`
once and then a cookie. A client that hangs up mid-answer is not an error."""

from __future__ import annotations

import hmac
import ipaddress
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from harness.config.protocols import protocol_of
from harness.core.audio import MAX_CLIP_BYTES
from harness.core.dataset import Clip
from harness.core.errors import HarnessError
from harness.core.files import read_bytes
from harness.reports.analysis import analyse
from harness.reports.html import LIVE_SCRIPT
from harness.reports.loading import RunData
from harness.reports.media import audio_type
from harness.reports.sources import discover, load_sources

WATCHED = ("metrics.json", "records.jsonl", "run.json", "config.yaml")
TOKEN_COOKIE = "bgm_view_token"
LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
HUNG_UP = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


def is_loopback(host: str) -> bool:
    if host in LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass
class Page:
    signature: tuple[Any, ...]
    html: bytes  # the first comparison's page
    clips: dict[str, Path]
    others: list[bytes] = field(default_factory=list)  # /group/1, /group/2, ...


def comparisons(runs: Sequence[RunData]) -> list[tuple[str, list[RunData]]]:
    """The runs split into what can be compared in one table: one group per dataset and
    protocol (MusiCRS pools apart from DialBGM items, refine runs apart from rank runs),
    in the order first seen, each named by its dataset folder (and protocol)."""
    groups: dict[tuple[str, str], list[RunData]] = {}
    for run in runs:
        protocol = protocol_of(run.config).name
        groups.setdefault((str(run.dataset.root.resolve()), protocol), []).append(run)
    return [
        (Path(root).name + ("" if protocol == "rank" else f" ({protocol})"), members)
        for (root, protocol), members in groups.items()
    ]


def _signature(paths: Sequence[Path]) -> tuple[Any, ...]:
    """What the page depends on: every source and the size and time of its files."""
    found = discover(paths)
    stamps: list[Any] = []
    for source in found.sources:
        files = (
            [source.path] if source.kind == "predictions" else [source.path / n for n in WATCHED]
        )
        for file in files:
            try:
                stat = file.stat()
            except OSError:
                continue
            stamps.append((str(file), stat.st_size, stat.st_mtime_ns))
    return (tuple(stamps), tuple(found.warnings))


class LiveReport:
    """The report page of `paths`, rebuilt when the results change."""

    def __init__(self, paths: Sequence[Path], *, dataset: Path | None = None) -> None:
        self.paths = list(paths)
        self.dataset = dataset
        self._page: Page | None = None
        self._lock = threading.Lock()

    def signature(self) -> str:
        return str(hash(_signature(self.paths)))

    def page(self) -> Page:
        with self._lock:
            signature = _signature(self.paths)
            if self._page is None or self._page.signature != signature:
                self._page = self._build(signature)
            return self._page

    def _build(self, signature: tuple[Any, ...]) -> Page:
        from harness.reports.html import render_html
        from harness.reports.writing import report_figures

        found = discover(self.paths)
        runs, warnings = load_sources(found.sources, dataset=self.dataset)
        warnings = found.warnings + warnings
        title = ", ".join(p.resolve().name or str(p) for p in self.paths)
        if not runs:
            return Page(signature, _waiting(title, warnings).encode(), {})

        def url(clip: Clip) -> str:
            return "/audio/" + quote(clip.id, safe="")

        groups = comparisons(runs)
        links = [(name, "/" if i == 0 else f"/group/{i}") for i, (name, _) in enumerate(groups)]
        pages: list[bytes] = []
        clips: dict[str, Path] = {}
        for index, (name, members) in enumerate(groups):
            analysis = analyse(members)
            figures = report_figures(analysis, files=False)
            shown = title if len(groups) == 1 else f"{title}: {name}"
            html, _ = render_html(
                analysis,
                figures,
                Path("."),
                title=shown,
                audio=url,
                live=True,
                warnings=warnings if index == 0 else (),
                groups=links if len(groups) > 1 else (),
            )
            pages.append(html.encode())
            for cid, clip in members[0].dataset.clips.items():
                if clip.has_audio:
                    clips.setdefault(cid, clip.path)
        return Page(signature, pages[0], clips, pages[1:])


def _waiting(title: str, warnings: Sequence[str]) -> str:
    from html import escape

    notes = "".join(f"<li>{escape(w)}</li>" for w in warnings)
    return (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{escape(title)}</title>"
        "</head><body><h1>No finished runs yet</h1><p>This page reloads when there are.</p>"
        f"<ul>{notes}</ul>{LIVE_SCRIPT}</body></html>"
    )


def handler(report: LiveReport, *, local: bool, token: str | None) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            try:
                self._answer()
            except HUNG_UP:
                self.close_connection = True  # the client left; nothing to tell it

        def _refused(self) -> str | None:
            """Why this request is refused (Host header, token), or None."""
            if local:
                name = urlsplit("//" + (self.headers.get("Host") or "")).hostname or ""
                if name not in LOCAL_NAMES:
                    return "this report is served to this machine only (Host header refused)"
            if token is not None:
                query = parse_qs(urlsplit(self.path).query).get("token", [""])[0]
                cookie = SimpleCookie(self.headers.get("Cookie") or "").get(TOKEN_COOKIE)
                given = query or (cookie.value if cookie else "")
                if not hmac.compare_digest(given.encode(), token.encode()):
                    return "an access token is needed: open the link you were given (?token=...)"
            return None

        def _answer(self) -> None:
            refused = self._refused()
            if refused is not None:
                self._send(refused.encode(), "text/plain; charset=utf-8", HTTPStatus.FORBIDDEN)
                return
            path = urlsplit(self.path).path
            try:
                if path in ("/", "/index.html"):
                    self._send(report.page().html, "text/html; charset=utf-8")
                elif path.startswith("/group/") and path.removeprefix("/group/").isdigit():
                    others = report.page().others
                    index = int(path.removeprefix("/group/")) - 1
                    if not 0 <= index < len(others):
                        self.send_error(HTTPStatus.NOT_FOUND, "no such comparison")
                        return
                    self._send(others[index], "text/html; charset=utf-8")
                elif path == "/_signature":
                    self._send(report.signature().encode(), "text/plain; charset=utf-8")
                elif path.startswith("/audio/"):
                    clip = report.page().clips.get(unquote(path.removeprefix("/audio/")))
                    if clip is None or not clip.is_file():
                        self.send_error(HTTPStatus.NOT_FOUND, "no such clip")
                        return
                    self._send(read_bytes(clip, limit=MAX_CLIP_BYTES), audio_type(clip))
                else:
                    self.send_error(HTTPStatus.NOT_FOUND)
            except HarnessError as exc:
                self._send(str(exc).encode(), "text/plain; charset=utf-8", HTTPStatus.BAD_REQUEST)

        def _send(self, body: bytes, mime: str, status: HTTPStatus = HTTPStatus.OK) -> None:
            self.send_response(status)
            self.send_header("Content-Type", mime)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            if token is not None and "token=" in (urlsplit(self.path).query or ""):
                self.send_header(
                    "Set-Cookie", f"{TOKEN_COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/"
                )
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return  # the terminal shows what the command printed, not every request

    return Handler


class _Server(ThreadingHTTPServer):
    token: str | None = None

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], HUNG_UP):
            return  # a client that hung up mid-answer (a closed tab) is not an error
        super().handle_error(request, client_address)


def serve(
    report: LiveReport, host: str, port: int, token: str | None = None
) -> ThreadingHTTPServer:
    """A server for `report` bound to host:port (not yet serving: call serve_forever); with
    `token`, every request must carry it. Bound to loopback, foreign Host headers are
    refused."""
    server = _Server((host, port), handler(report, local=is_loopback(host), token=token))
    server.token = token
    return server
