"""Waking idle workers when a job is queued, instead of waiting for their next poll.

Each worker on this machine listens on a Unix datagram socket ``DATA/wake/<worker>.sock``; the web
process sends one byte to every socket there after it commits a new job. A worker sleeps in
``select`` on its socket with the poll interval as the timeout, so a lost or refused wake-up
costs at most one poll interval (workers on other machines, sharing a PostgreSQL, simply poll).
Nothing is read from the datagram: it only ends the wait.
"""

from __future__ import annotations

import os
import select
import socket
from pathlib import Path

__all__ = ["Waker", "wake_all"]

#: Unix socket paths are limited to 107 bytes on Linux.
_MAX_PATH = 100


def _directory(data: str | os.PathLike[str]) -> Path:
    return Path(data) / "wake"


class Waker:
    """A worker's wake-up socket (``None``-safe: without one, :meth:`wait` just sleeps)."""

    def __init__(self, data: str | os.PathLike[str], name: str) -> None:
        self.path = _directory(data) / f"{name}.sock"
        self._sock: socket.socket | None = None
        if len(os.fsencode(self.path)) > _MAX_PATH:
            return
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            self.path.unlink(missing_ok=True)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            sock.bind(os.fspath(self.path))
            sock.setblocking(False)
            self._sock = sock
        except OSError:
            self._sock = None

    def wait(self, timeout: float) -> None:
        """Return after ``timeout`` seconds, or sooner when woken."""
        if self._sock is None:
            select.select([], [], [], timeout)
            return
        ready, _, _ = select.select([self._sock], [], [], timeout)
        if ready:
            try:
                while self._sock.recv(64):
                    pass
            except OSError:  # drained (EAGAIN)
                pass

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
            self.path.unlink(missing_ok=True)


def wake_all(data: str | os.PathLike[str]) -> int:
    """Send a wake-up to every worker socket under ``data``; returns how many were reached."""
    directory = _directory(data)
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
