"""Run the service: migrate the schema, start the worker processes, serve HTTP until SIGTERM/SIGINT.

The web server (uvicorn, in this process) and the workers (``python -m numdiff.service.worker``,
child processes) share only the database and the store. A worker that dies is started again
within a second; on SIGTERM/SIGINT uvicorn stops taking requests, the workers give their running
jobs back to the queue, and the process exits 0.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from types import FrameType

from numdiff._core.files import atomic_write
from numdiff.service.settings import Settings

__all__ = ["ORPHAN_GRACE_S", "collect_orphans", "prepare", "serve"]

#: A blob no run or job refers to is removed once it is this old (commits reach the database within it).
ORPHAN_GRACE_S = 600.0
#: How often ``numdiff serve`` collects orphan blobs (besides at start-up).
ORPHAN_SWEEP_S = 3600.0


def collect_orphans(settings: Settings, older_than_s: float = ORPHAN_GRACE_S) -> int:
    """Remove blobs that no run or job refers to (a crash between storing and recording); how many."""
    from numdiff.service import crud, db
    from numdiff.service.store import Store

    engine = db.make_engine(settings.db_url)
    try:
        with db.session_factory(engine)() as session:
            keep = crud.referenced_blobs(session)
    finally:
        engine.dispose()
    return Store(settings.data).collect_orphans(keep, older_than_s)


def prepare(settings: Settings) -> None:
    """Create or upgrade the schema, remove uploads a crash left half-written, collect orphan blobs."""
    from numdiff.service import db
    from numdiff.service.store import Store

    engine = db.make_engine(settings.db_url)
    try:
        db.migrate(engine)
    finally:
        engine.dispose()
    Store(settings.data).clean_tmp()
    collect_orphans(settings)


class _Workers:
    def __init__(self, settings: Settings, count: int) -> None:
        self.settings = settings
        self.count = count
        self.procs: list[subprocess.Popen[bytes] | None] = [None] * count
        self.stopping = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="numdiff-workers", daemon=True)

    def _start(self, i: int) -> None:
        import os

        from numdiff.service.settings import DB_URL_ENV

        # the database URL (maybe with a password) goes by environment, readable by this user only:
        # a command line is world-readable in /proc and ps
        cmd = [sys.executable, "-m", "numdiff.service.worker", "--data", str(self.settings.data), "--name", f"w{i}"]
        self.procs[i] = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                         env={**os.environ, DB_URL_ENV: self.settings.db_url})

    def start(self) -> None:
        for i in range(self.count):
            self._start(i)
        self._write_pids()
        self._thread.start()

    def _write_pids(self) -> None:
        """``DATA/workers.pid``: the worker processes' ids, one a line (for operators and the fault tests)."""
        atomic_write(self.settings.data / "workers.pid", "".join(f"{p.pid}\n" for p in self.procs if p is not None))

    def _watch(self) -> None:
        import time

        last_sweep = time.monotonic()
        while not self.stopping.wait(1.0):
            if time.monotonic() - last_sweep > ORPHAN_SWEEP_S:
                last_sweep = time.monotonic()
                try:
                    collect_orphans(self.settings)
                except Exception as e:  # noqa: BLE001 - collecting is housekeeping: say so and go on
                    print(f"numdiff serve: collecting orphan blobs failed: {e}", file=sys.stderr, flush=True)
            changed = False
            for i, p in enumerate(self.procs):
                if p is not None and p.poll() is not None and not self.stopping.is_set():
                    print(f"numdiff serve: worker {p.pid} exited with {p.returncode}; starting another",
                          file=sys.stderr, flush=True)
                    self._start(i)
                    changed = True
            if changed:
                self._write_pids()

    def stop(self, timeout: float = 15.0) -> None:
        self.stopping.set()
        for p in self.procs:
            if p is not None and p.poll() is None:
                p.terminate()
        for p in self.procs:
            if p is None:
                continue
            try:
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        # the workers are gone: a pid file left behind would name processes that no longer exist (or others')
        (self.settings.data / "workers.pid").unlink(missing_ok=True)


def serve(settings: Settings, host: str, port: int, workers: int) -> None:
    import signal

    import uvicorn

    class _Server(uvicorn.Server):
        """uvicorn re-raises SIGTERM after its shutdown, which would skip stopping the workers: don't."""

        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            if self.should_exit and sig == signal.SIGINT:
                self.force_exit = True
            else:
                self.should_exit = True

    from numdiff.service.app import create_app
    from numdiff.service.connections import KEEP_ALIVE_S, guarded_protocol

    prepare(settings)
    pool = _Workers(settings, workers)
    pool.start()
    try:
        # header and body timeouts and a cap per client address: numdiff.service.connections
        config = uvicorn.Config(create_app(settings), host=host, port=port, log_level="warning",
                                timeout_graceful_shutdown=5, limit_concurrency=2000, backlog=2048,
                                timeout_keep_alive=KEEP_ALIVE_S,
                                http=guarded_protocol(settings.request_timeout_s, settings.max_connections_per_client))
        server = _Server(config)
        print(f"numdiff serve: http://{host}:{port}/ui (API reference at /docs), data in {settings.data}, "
              f"{workers} worker(s)", file=sys.stderr, flush=True)
        server.run()
    finally:
        pool.stop()
        from numdiff.service.store import Store

        Store(settings.data).release_tmp()
