"""Issue 22, item 3: connections held without a token. Idle connections, headers trickled a byte at
a time and bodies trickled a byte at a time used to stay open as long as their client liked (about
2,000 of them would make the server answer 503 to everyone); now headers must be complete within the
request timeout, a body must keep a minimum rate, and one address may hold only so many connections.

A real ``numdiff serve`` on loopback with a 2 s request timeout and a cap of 60 connections per
client; 50 slow connections, then 70 idle ones, each run bounded in time.
"""

from __future__ import annotations

import select
import socket
import time
from pathlib import Path

import httpx

from tests.service._server import Server, running

TIMEOUT_S = 2.0
CAP = 60


def _connect(server: Server) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    s.setblocking(False)
    return s


def _closed_by_server(s: socket.socket) -> bool:
    """Whether the server closed it (EOF or reset; an answer such as 400 before closing counts as closed too)."""
    ready, _, _ = select.select([s], [], [], 0)
    if not ready:
        return False
    try:
        return s.recv(65536) == b"" or True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except BlockingIOError:
        return False


def _trickle(s: socket.socket, byte: bytes) -> bool:
    """Send one byte; False once the server has closed the connection."""
    try:
        s.send(byte)
        return True
    except (BrokenPipeError, ConnectionResetError):
        return False
    except BlockingIOError:
        return True


def test_slow_and_idle_connections_are_closed_and_a_client_is_still_served(tmp_path: Path) -> None:
    with running(tmp_path / "data", None, workers=0, NUMDIFF_SERVICE_REQUEST_TIMEOUT_S=str(TIMEOUT_S),
                 NUMDIFF_SERVICE_MAX_CONNECTIONS_PER_CLIENT=str(CAP)) as server:
        idle = [_connect(server) for _ in range(20)]
        headers = [_connect(server) for _ in range(15)]
        bodies = [_connect(server) for _ in range(15)]
        for s in headers:
            s.send(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        for s in bodies:
            s.send(b"POST /api/v1/runs HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\n")
        t0 = time.monotonic()
        closed_at: dict[int, float] = {}
        served = None
        everyone = [(s, b"X-Slow: 1\r\n"[:1]) for s in headers] + [(s, b"a") for s in bodies] + [(s, b"") for s in idle]
        while time.monotonic() - t0 < 15 and len(closed_at) < len(everyone):
            for s, byte in everyone:
                if s.fileno() in closed_at:
                    continue
                if _closed_by_server(s) or (byte and not _trickle(s, byte)):
                    closed_at[s.fileno()] = time.monotonic() - t0
            if served is None and time.monotonic() - t0 > 1.0:  # 50 slow connections open: a client is served
                served = httpx.get(server.url + "/healthz", timeout=10).status_code
            time.sleep(0.25)
        assert served == 200
        assert len(closed_at) == len(everyone), f"{len(everyone) - len(closed_at)} slow connections still open after 15 s"
        assert max(closed_at.values()) < TIMEOUT_S + 6, closed_at
        for s, _ in everyone:
            s.close()

        # the cap: 70 idle connections from one address, the 10 beyond 60 are closed at once
        many = [_connect(server) for _ in range(70)]
        time.sleep(1.0)
        refused = sum(_closed_by_server(s) for s in many)
        assert refused >= 70 - CAP, refused
        for s in many:
            s.close()
        time.sleep(0.5)
        assert httpx.get(server.url + "/healthz", timeout=10).status_code == 200
