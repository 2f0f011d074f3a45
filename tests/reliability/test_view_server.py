"""`harness view` beyond this machine and against hostile clients (issue 27, also noticed):
bound to a non-loopback address it asks for an access token (`?token=` once, then a cookie),
generating one and saying so when none is given; bound to loopback it answers only requests
whose Host header names this machine (a DNS-rebinding page cannot read the report); and a
client that disconnects mid-answer prints no BrokenPipe traceback."""

from __future__ import annotations

import http.client
import socket
import threading
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.main import app
from harness.reports.server import LiveReport, serve
from tests.conftest import write_tiny_dataset
from tests.harness.reports._runs import pointwise_records, tiny_scores, write_run


@pytest.fixture
def results(tmp_path: Path) -> Path:
    dataset = write_tiny_dataset(tmp_path / "data", n_items=12, seconds=0.1)
    write_run(tmp_path / "results" / "run", dataset, pointwise_records(tiny_scores(12)))
    return tmp_path / "results"


def _serving(server: ThreadingHTTPServer) -> Iterator[int]:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def _get(
    port: int, path: str, host: str | None = None, cookie: str | None = None
) -> tuple[int, dict[str, str]]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Host": host or f"127.0.0.1:{port}"}
    if cookie:
        headers["Cookie"] = cookie
    connection.request("GET", path, headers=headers)
    response = connection.getresponse()
    response.read()
    connection.close()
    return response.status, dict(response.getheaders())


@pytest.mark.slow
def test_loopback_view_refuses_a_foreign_host_header(results: Path) -> None:
    server = serve(LiveReport([results]), "127.0.0.1", 0)
    for port in _serving(server):
        assert _get(port, "/_signature")[0] == 200
        assert _get(port, "/_signature", host=f"localhost:{port}")[0] == 200
        assert _get(port, "/_signature", host="rebound.attacker.test")[0] == 403
        assert _get(port, "/", host=f"evil.test:{port}")[0] == 403


@pytest.mark.slow
def test_a_token_guards_every_page_then_rides_in_a_cookie(results: Path) -> None:
    server = serve(LiveReport([results]), "127.0.0.1", 0, token="s3cret")
    for port in _serving(server):
        assert _get(port, "/")[0] == 403
        assert _get(port, "/_signature?token=wrong")[0] == 403
        status, headers = _get(port, "/_signature?token=s3cret")
        assert status == 200
        cookie = headers["Set-Cookie"].split(";")[0]
        assert "HttpOnly" in headers["Set-Cookie"]
        assert _get(port, "/_signature", cookie=cookie)[0] == 200


@pytest.mark.slow
def test_view_beyond_this_machine_makes_a_token_and_says_so(
    results: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, object] = {}

    def stop_at_once(self: ThreadingHTTPServer, poll_interval: float = 0.5) -> None:
        seen["token"] = getattr(self, "token", None)
        raise KeyboardInterrupt

    monkeypatch.setattr(ThreadingHTTPServer, "serve_forever", stop_at_once)
    result = CliRunner().invoke(app, ["view", str(results), "--host", "0.0.0.0", "--port", "0"])
    assert result.exit_code == 0, result.output
    token = seen["token"]
    assert isinstance(token, str) and len(token) >= 12
    assert f"?token={token}" in result.output
    assert "listening beyond this machine" in result.output


@pytest.mark.slow
def test_a_client_that_hangs_up_prints_no_traceback(
    results: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    server = serve(LiveReport([results]), "127.0.0.1", 0)
    for port in _serving(server):
        for _ in range(5):
            with socket.create_connection(("127.0.0.1", port)) as sock:
                sock.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
                )
                sock.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
            # closed with a reset before the (large) page is written
        time.sleep(1.0)
        assert _get(port, "/_signature")[0] == 200  # still serving
    captured = capfd.readouterr()
    assert "Traceback" not in captured.err + captured.out
    assert "BrokenPipe" not in captured.err and "ConnectionReset" not in captured.err
