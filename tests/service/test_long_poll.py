"""Issue 22, item 9: long polls are woken by the worker that finishes the run, not by re-querying
the database every 50 ms each (100 pollers used to cost 17.6 s of server CPU in 21.8 s).

A real ``numdiff serve`` on loopback without workers keeps the run queued while 30 long polls wait
on it; the server process's CPU time over 4 s of waiting is measured, then a worker is started by
hand, finishes the run, and every poll must answer within a second of the run's finish.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.service._server import EXAMPLE, TEST_ENV, running

WAITERS = 30


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of one process (not its children: the workers are not the web server)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_long_polls_cost_little_cpu_while_waiting_and_answer_when_the_worker_finishes(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running(data, None, workers=0) as server:
        assert server.proc is not None
        token = server.token("long-poll")
        headers = {"Authorization": f"Bearer {token}"}
        files = {"etrecord": ("e", EXAMPLE.etrecord.read_bytes()), "etdump": ("d", EXAMPLE.etdump.read_bytes()),
                 "debug_buffer": ("b", EXAMPLE.debug_buffer.read_bytes())}
        r = httpx.post(server.url + "/api/v1/runs", headers=headers, data={"model": "m"}, files=files, timeout=30)
        assert r.status_code == 201, r.text
        rid = r.json()["id"]
        answered: list[float] = []

        async def waiter(client: httpx.AsyncClient) -> str:
            deadline = time.monotonic() + 150
            while time.monotonic() < deadline:  # bounded: re-asks after each 30 s wait until the run is finished
                got = (await client.get(f"/api/v1/runs/{rid}", params={"wait": 30})).json()
                if got["status"] in ("done", "failed"):
                    answered.append(time.time())
                    return str(got["status"])
            return "timeout"

        async def scenario() -> tuple[float, list[str]]:
            limits = httpx.Limits(max_connections=WAITERS + 5)
            async with httpx.AsyncClient(base_url=server.url, headers=headers, timeout=60, limits=limits) as client:
                tasks = [asyncio.create_task(waiter(client)) for _ in range(WAITERS)]
                await asyncio.sleep(2.0)  # every poll is in and waiting
                assert server.proc is not None
                before = _cpu_seconds(server.proc.pid)
                await asyncio.sleep(4.0)
                spent = _cpu_seconds(server.proc.pid) - before
                worker = subprocess.Popen([sys.executable, "-m", "numdiff.service.worker", "--data", str(data),
                                           "--name", "by-hand"], stdin=subprocess.DEVNULL,
                                          env={**os.environ, **TEST_ENV})
                try:
                    statuses = await asyncio.wait_for(asyncio.gather(*tasks), 180)
                finally:
                    worker.send_signal(signal.SIGTERM)
                    try:
                        worker.wait(timeout=30)
                    except subprocess.TimeoutExpired:
                        worker.kill()
                        worker.wait()
                return spent, list(statuses)

        spent, statuses = asyncio.run(scenario())
        # before: ~30 x 20 database looks a second, a whole core; now a look per ring or per 2 s backstop
        assert spent < 0.8, f"{WAITERS} waiting long polls used {spent:.2f} s of server CPU in 4 s"
        assert statuses == ["done"] * WAITERS
        run = httpx.get(f"{server.url}/api/v1/runs/{rid}", headers=headers, timeout=10).json()
        finished = datetime.datetime.fromisoformat(run["finished"]).replace(tzinfo=datetime.timezone.utc).timestamp()
        late = max(answered) - finished
        assert late < 1.0, f"the last long poll answered {late:.2f} s after the run finished"
