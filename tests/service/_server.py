"""Start real ``numdiff serve`` processes (SQLite or PostgreSQL) and a real PostgreSQL 15 for the service tests."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from numdiff.examples import example_files
from numdiff.service import auth, db
from numdiff.service.server import prepare
from numdiff.service.settings import Settings

PG_BIN = Path("/usr/lib/postgresql/15/bin")
EXAMPLE = example_files()
#: Small limits so the tests can cross them: 1 MiB per uploaded file, a 3 s lease.
TEST_ENV = {"NUMDIFF_SERVICE_MAX_UPLOAD_MB": "1", "NUMDIFF_SERVICE_LEASE_S": "3",
            "NUMDIFF_SERVICE_JOB_TIMEOUT_S": "120"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Server:
    """One ``numdiff serve`` subprocess on a loopback port."""

    data: Path
    db_url: str | None
    workers: int = 2
    env: dict[str, str] = field(default_factory=dict)
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    log: Path | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> Server:
        self.port = free_port()
        cmd = [sys.executable, "-m", "numdiff", "serve", "--data", str(self.data), "--host", "127.0.0.1",
               "--port", str(self.port), "--workers", str(self.workers)]
        if self.db_url:
            cmd += ["--db", self.db_url]
        self.log = self.data.parent / f"{self.data.name}-server-{self.port}.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env={**os.environ, **TEST_ENV, **self.env})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"numdiff serve exited with {self.proc.returncode}:\n{self.log.read_text()}")
            try:
                if httpx.get(self.url + "/healthz", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.kill()
        raise RuntimeError(f"numdiff serve did not answer /healthz within {timeout} s:\n{self.log.read_text()}")

    def worker_pids(self) -> list[int]:
        path = self.data / "workers.pid"
        return [int(line) for line in path.read_text().split()] if path.exists() else []

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, then wait; returns the exit status."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise

    def kill(self) -> None:
        """SIGKILL the server (its workers stop on their own when it dies)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        self._reap_workers()

    def _reap_workers(self, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        for pid in self.worker_pids():
            while time.monotonic() < deadline and _alive(pid):
                time.sleep(0.1)
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)

    def token(self, project: str) -> str:
        settings = Settings.create(self.data, self.db_url)
        prepare(settings)
        engine = db.make_engine(settings.db_url)
        try:
            with db.session_factory(engine)() as s:
                return auth.create_token(s, project)
        finally:
            engine.dispose()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


@contextmanager
def running(data: Path, db_url: str | None, workers: int = 2, **env: str) -> Iterator[Server]:
    server = Server(data, db_url, workers, env).start()
    try:
        yield server
    finally:
        try:
            server.stop()
        finally:
            server.kill()


# --- PostgreSQL 15 from Debian's packages ----------------------------------------------------------

def need_postgres() -> None:
    if (PG_BIN / "initdb").exists() and (PG_BIN / "pg_ctl").exists():
        return
    why = f"PostgreSQL 15 is not installed ({PG_BIN}/initdb missing; run scripts/install_test_system_deps.sh as root)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(why + " and CI=true: the PostgreSQL tests must run in CI")
    pytest.skip(why)


def _as_user(cmd: list[str], user: str | None) -> list[str]:
    if user is None:
        return cmd
    return ["runuser", "-u", user, "--"] + cmd


@contextmanager
def postgres() -> Iterator[str]:
    """A throw-away PostgreSQL 15 cluster on a loopback port; yields its URL (trust auth, database ``numdiff``)."""
    need_postgres()
    user = "postgres" if os.geteuid() == 0 else None
    root = Path(tempfile.mkdtemp(prefix="numdiff-pg-"))
    datadir, sockets = root / "data", root / "sock"
    sockets.mkdir()
    if user is not None:
        shutil.chown(root, user)
        shutil.chown(sockets, user)
    port = free_port()
    role = user or os.environ.get("USER", "postgres")
    subprocess.run(_as_user([str(PG_BIN / "initdb"), "-D", str(datadir), "-A", "trust", "-U", role, "-E", "UTF8",
                             "--no-sync"], user), check=True, capture_output=True, timeout=120)
    opts = f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
    subprocess.run(_as_user([str(PG_BIN / "pg_ctl"), "-D", str(datadir), "-o", opts, "-l", str(root / "pg.log"), "-w",
                             "-t", "60", "start"], user), check=True, capture_output=True, timeout=90)
    try:
        subprocess.run(_as_user([str(PG_BIN.parent / "bin" / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", role,
                                 "numdiff"], user), check=True, capture_output=True, timeout=60)
        yield f"postgresql://{role}@127.0.0.1:{port}/numdiff"
    finally:
        subprocess.run(_as_user([str(PG_BIN / "pg_ctl"), "-D", str(datadir), "-m", "fast", "-w", "stop"], user),
                       capture_output=True, timeout=60)
        shutil.rmtree(root, ignore_errors=True)


def submit_files(client: Any, model: str = "mlp", **labels: str) -> dict[str, Any]:
    out: dict[str, Any] = client.submit(model, EXAMPLE.etrecord, EXAMPLE.etdump, EXAMPLE.debug_buffer, labels)
    return out


def sign_in(url: str, token: str) -> dict[str, str]:
    """The cookies of a browser session signed in with ``token`` (``POST /ui/login``, as the sign-in form does)."""
    r = httpx.post(url + "/ui/login", data={"token": token}, timeout=30)
    assert r.status_code == 303, r.text
    return dict(r.cookies)
