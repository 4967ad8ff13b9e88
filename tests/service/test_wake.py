"""Idle workers are woken when a job is queued (Unix datagram sockets under DATA/wake)."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

from numdiff.service.worker.wake import Waker, wake_all


def test_a_waiting_worker_wakes_at_once_and_stale_sockets_are_removed(tmp_path: Path) -> None:
    waker = Waker(tmp_path, "w1")
    stale = tmp_path / "wake" / "dead.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.bind(str(stale))  # bound, then closed: like a worker killed without cleaning up
    took: list[float] = []

    def wait() -> None:
        t = time.monotonic()
        waker.wait(30.0)
        took.append(time.monotonic() - t)

    thread = threading.Thread(target=wait)
    thread.start()
    time.sleep(0.2)
    assert wake_all(tmp_path) == 1
    thread.join(timeout=10)
    assert not thread.is_alive() and took[0] < 10  # woken, not timed out after 30 s
    assert not stale.exists()
    waker.close()
    assert not (tmp_path / "wake" / "w1.sock").exists()
    assert wake_all(tmp_path) == 0


def test_without_a_socket_wait_just_sleeps(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 120)  # too long for a Unix socket path
    waker = Waker(deep, "w")
    t = time.monotonic()
    waker.wait(0.05)
    assert time.monotonic() - t >= 0.05
    assert wake_all(deep) == 0
