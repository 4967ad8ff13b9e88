"""Faults: a worker killed mid-job, the server killed mid-upload, restarts. Nothing lost, nothing half-visible."""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path

from numdiff.client import Client
from numdiff.report import Analysis
from tests.service._server import EXAMPLE, Server, running, submit_files
from tests.conftest import FIXTURES
from tests.service.conftest import floats, snr_rows

COLD = {"NUMDIFF_SERVICE_WARM_UP": "0"}  # workers start at once; each job imports the library itself (slower jobs)


def _wait_status(client: Client, run_id: int, wanted: set[str], timeout: float = 90) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = client.run(run_id)
        if run["status"] in wanted:
            return run
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} never reached {wanted}: {client.run(run_id)}")


def test_a_killed_worker_is_replaced_its_job_finishes_and_sigterm_gives_a_running_job_back(
        tmp_path: Path, reference: Analysis) -> None:
    from numdiff.service import db

    data = tmp_path / "data"
    server = Server(data, None, workers=1, env=COLD).start()
    try:
        token = server.token("faults")
        with Client(server.url, token) as client:
            run_id = submit_files(client)["id"]
            _wait_status(client, run_id, {"running"})
            [victim] = server.worker_pids()
            os.kill(victim, signal.SIGKILL)
            result = client.wait(run_id, timeout=180)
            assert result["status"] == "done", result
            assert result["attempts"] == 2
            jobs = result["jobs"]
            assert [j["kind"] for j in jobs] == ["profile", "gap", "culprits", "report"]
            assert all(j["status"] == "done" and j["elapsed_ms"] is not None for j in jobs), jobs
            assert sorted(j["attempts"] for j in jobs) == [1, 1, 1, 2]  # only the killed stage ran twice
            assert [(r["aot_ops"], r["runtime_ops"], floats(r["gap"])) for r in result["gap"]] == snr_rows(reference)
            assert server.worker_pids() != [victim]
            # a job the worker's runner has not warmed up for (the first one has): about a second or more
            llama = FIXTURES / "realistic" / "real_llama"
            second = client.submit("llama", llama / "etrecord.bin", llama / "etdump.etdp",
                                   llama / "debug_buffer.bin")["id"]
            _wait_status(client, second, {"running"})
        pids = server.worker_pids()
        assert server.stop() == 0  # SIGTERM: a clean stop
        assert not [p for p in pids if _alive(p)]
        assert not (data / "workers.pid").exists()  # no stale ids left for operators to signal
    finally:
        server.kill()
    engine = db.make_engine(db.default_url(data))
    try:
        with db.session_factory(engine)() as s:
            jobs = s.query(db.Job).filter(db.Job.run_id == second).order_by(db.Job.stage).all()
    finally:
        engine.dispose()
    assert [j.kind for j in jobs] == ["profile", "gap", "culprits", "report"]
    # the stage that was running was given back; the next worker starts it afresh (finished ones stay done)
    assert all(j.status == "done" or (j.status, j.attempts, j.worker) == ("queued", 0, None) for j in jobs), \
        [(j.kind, j.status, j.attempts, j.worker) for j in jobs]
    assert jobs[-1].status == "queued"


def _partial_upload(server: Server, token: str) -> socket.socket:
    """Send the headers and the first part of a multipart upload, then stall (returns the open socket)."""
    boundary = "numdiffboundary"
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nhalf\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"etrecord\"; filename=\"e\"\r\n"
            "Content-Type: application/octet-stream\r\n\r\n").encode()
    body = EXAMPLE.etrecord.read_bytes()
    total = len(head) + len(body) + 200
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    sock.sendall((f"POST /api/v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
                  f"Content-Type: multipart/form-data; boundary={boundary}\r\nContent-Length: {total}\r\n\r\n").encode()
                 + head + body[: len(body) // 2])
    return sock


def test_server_killed_mid_upload_leaves_nothing_half_visible_and_restart_loses_nothing(
        tmp_path: Path, reference: Analysis) -> None:
    data = tmp_path / "data"
    server = Server(data, None, workers=0, env=COLD).start()
    try:
        token = server.token("crash")
        with Client(server.url, token) as client:
            queued = [submit_files(client, device=f"d{i}")["id"] for i in range(2)]
        sock = _partial_upload(server, token)
        deadline = time.monotonic() + 20
        while not list((data / "tmp").rglob("upload-*")):  # in the server's own folder, tmp/<host>-<pid>
            assert time.monotonic() < deadline, "the server never started writing the upload"
            time.sleep(0.05)
        objects_before = sorted((data / "objects").rglob("*"))
        server.kill()
        sock.close()
    finally:
        server.kill()
    assert sorted((data / "objects").rglob("*")) == objects_before  # the half upload never became a blob
    with running(data, None, workers=1) as again:
        assert not list((data / "tmp").iterdir())  # the half-written temporary file is gone
        with Client(again.url, token) as client:
            runs = client.runs()
            assert sorted(r["id"] for r in runs) == sorted(queued)  # no run from the half upload
            assert {r["model"] for r in runs} == {"mlp"}
            for run_id in queued:
                result = client.wait(run_id, timeout=120)
                assert result["status"] == "done", result
                assert [(r["aot_ops"], r["runtime_ops"], floats(r["gap"])) for r in result["gap"]] == snr_rows(reference)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False
