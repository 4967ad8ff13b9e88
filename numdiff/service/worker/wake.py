"""Waking idle workers when a job is queued, instead of waiting for their next poll.

Each worker on this machine listens on a Unix datagram socket ``DATA/wake/<worker>.sock``; the web
process sends one byte to every socket there after it commits a new job. A worker sleeps in
``select`` on its socket with the poll interval as the timeout, so a lost or refused wake-up
costs at most one poll interval (workers on other machines, sharing a PostgreSQL, simply poll).
Nothing is read from the datagram: it only ends the wait.

The other way round, a worker that finishes a run (done or failed) rings every web process's
socket under ``DATA/wake/pollers/``: long polls (``GET /api/v1/runs/{id}?wait=S``) wait on a
:class:`RunBell` in the event loop and look at the database again only when it rings (or, as a
backstop for workers on other machines, every :data:`POLL_BACKSTOP_S` seconds), instead of
every 50 ms each.
"""

from __future__ import annotations

import asyncio
import os
import select
import socket
from pathlib import Path

__all__ = ["POLLERS", "POLL_BACKSTOP_S", "RunBell", "Waker", "wake_all"]

#: Unix socket paths are limited to 107 bytes on Linux.
_MAX_PATH = 100
#: The group of sockets the web processes' long polls listen on (``DATA/wake/pollers``).
POLLERS = "pollers"
#: A long poll looks at its run at least this often even without a wake-up (a worker on another machine).
POLL_BACKSTOP_S = 2.0


def _directory(data: str | os.PathLike[str], group: str = "") -> Path:
    return Path(data) / "wake" / group if group else Path(data) / "wake"


def _bind(root: Path, path: Path) -> socket.socket | None:
    """A non-blocking datagram socket bound at ``path`` under ``root`` (a stale one there is replaced), or None."""
    if len(os.fsencode(path)) > _MAX_PATH:
        return None
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)  # every folder of ours private, not only the last
        path.parent.mkdir(mode=0o700, exist_ok=True)
        path.unlink(missing_ok=True)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(os.fspath(path))
        sock.setblocking(False)
        return sock
    except OSError:
        return None


def _drain(sock: socket.socket) -> None:
    try:
        while sock.recv(64):
            pass
    except OSError:  # drained (EAGAIN)
        pass


class Waker:
    """A worker's wake-up socket (``None``-safe: without one, :meth:`wait` just sleeps)."""

    def __init__(self, data: str | os.PathLike[str], name: str) -> None:
        self.path = _directory(data) / f"{name}.sock"
        self._sock = _bind(_directory(data), self.path)

    def wait(self, timeout: float) -> None:
        """Return after ``timeout`` seconds, or sooner when woken."""
        if self._sock is None:
            select.select([], [], [], timeout)
            return
        ready, _, _ = select.select([self._sock], [], [], timeout)
        if ready:
            _drain(self._sock)

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
            self.path.unlink(missing_ok=True)


class RunBell:
    """A web process's wake-up socket for long polls, read in its event loop.

    A poller takes :meth:`ticket` *before* it looks at its run, then waits on it (:meth:`wait`): a ring
    between the look and the wait is not lost. The socket is bound on first use, in the event loop
    that then reads it; without one (path too long), waits simply time out, at the backstop.
    """

    def __init__(self, data: str | os.PathLike[str]) -> None:
        self._root = _directory(data)
        self.path = _directory(data, POLLERS) / f"web-{os.getpid()}.sock"
        self._sock: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._event: asyncio.Event | None = None

    def ticket(self) -> asyncio.Event:
        """The event the next ring sets (call in the event loop)."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self.close()
            self._loop = loop
            self._sock = _bind(self._root, self.path)
            if self._sock is not None:
                loop.add_reader(self._sock.fileno(), self._ring)
        if self._event is None:
            self._event = asyncio.Event()
        return self._event

    def _ring(self) -> None:
        if self._sock is not None:
            _drain(self._sock)
        event, self._event = self._event, None
        if event is not None:
            event.set()

    @staticmethod
    async def wait(ticket: asyncio.Event, timeout: float) -> None:
        """Return when ``ticket``'s ring comes, or after ``timeout`` seconds."""
        try:
            await asyncio.wait_for(ticket.wait(), timeout)
        except TimeoutError:
            pass

    def close(self) -> None:
        if self._sock is not None:
            if self._loop is not None and not self._loop.is_closed():
                self._loop.remove_reader(self._sock.fileno())
            self._sock.close()
            self._sock = None
            self.path.unlink(missing_ok=True)
        self._loop = None
        self._event = None


def wake_all(data: str | os.PathLike[str], group: str = "") -> int:
    """Send a wake-up to every socket of ``group`` under ``data`` (the workers by default); how many were reached."""
    directory = _directory(data, group)
    try:
        names = [p for p in directory.iterdir() if p.suffix == ".sock"]
    except OSError:
        return 0
    reached = 0
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.setblocking(False)
        for path in names:
            try:
                sock.sendto(b"j", os.fspath(path))
                reached += 1
            except ConnectionRefusedError:  # a worker that died without removing its socket
                path.unlink(missing_ok=True)
            except OSError:  # full queue (already woken) or another transient problem: it polls anyway
                pass
    return reached
