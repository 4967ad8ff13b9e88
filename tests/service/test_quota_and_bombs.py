"""A full store quota and a zip-bomb ETRecord, against a real `numdiff serve` on loopback.

The quota (NUMDIFF_SERVICE_STORE_QUOTA_MB) makes "the disk is full" happen for real in the server
process: uploads past it get 507 and leave nothing, a job whose results no longer fit fails with
the reason, and a restart with room serves the old runs and takes new ones. A zip bomb (a small
ETRecord whose extra entry inflates to 64 MiB) fails its job in the worker with the hardened
reader's message while the server stays up.
"""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import httpx
import pytest

from numdiff.client import Client, ServiceError, ServiceInputError
from tests.service._server import EXAMPLE, running, submit_files
from tests.service.conftest import data_files


def _store_bytes(data: Path) -> int:
    return sum(p.stat().st_size for p in data_files(data) if p.is_relative_to(data / "objects"))


def test_store_quota_full_is_507_nothing_half_visible_and_a_restart_with_room_recovers(tmp_path: Path) -> None:
    data = tmp_path / "data"
    upload = sum(p.stat().st_size for p in (EXAMPLE.etrecord, EXAMPLE.etdump, EXAMPLE.debug_buffer))
    quota_mb = 0.9  # room for one run's artifacts and results (about 0.4 MB), not for the upload after
    with running(data, None, workers=1, NUMDIFF_SERVICE_STORE_QUOTA_MB=str(quota_mb)) as server:
        token = server.token("quota")
        with Client(server.url, token) as client:
            first = client.wait(submit_files(client, model="m", n="1")["id"])
            assert first["status"] == "done"
            statuses = []
            for i in range(2, 6):  # new debug buffers each time, so dedupe cannot make room
                buffer = tmp_path / f"debug{i}.bin"
                buffer.write_bytes(EXAMPLE.debug_buffer.read_bytes() + bytes([i]) * (200_000))
                try:
                    run = client.submit("m", EXAMPLE.etrecord, EXAMPLE.etdump, buffer, {"n": str(i)})
                    statuses.append(client.wait(run["id"])["status"])
                except ServiceError as e:
                    assert "store is full (HTTP 507" in str(e) and "NUMDIFF_SERVICE_STORE_QUOTA_MB" in str(e)
                    statuses.append("507")
            assert "507" in statuses, statuses
            runs = client.runs(model="m")
            assert all(r["status"] in ("done", "failed") for r in runs)
            assert {r["labels"]["n"] for r in runs} == {"1", *(str(i) for i, s in zip(range(2, 6), statuses)
                                                               if s != "507")}
            for r in runs:
                if r["status"] == "failed":
                    assert "could not store the results" in r["reason"] or "quota" in r["reason"]
        assert not [p for p in (data / "tmp").iterdir() if p.is_file()]
        assert not [p for p in (data / "tmp").rglob("*") if p.is_file()]  # per-process folders included
        assert _store_bytes(data) <= quota_mb * (1 << 20) + upload
        assert httpx.get(server.url + "/healthz").json() == {"status": "ok"}
    with running(data, None, workers=1) as server:  # restarted with room
        with Client(server.url, server.token("quota")) as client:
            assert client.result(first["id"])["status"] == "done"
            client.fetch_report(first["id"], tmp_path / "first.html")
            assert (tmp_path / "first.html").read_text().startswith("<!DOCTYPE html>")
            assert client.wait(submit_files(client, model="m", n="after")["id"])["status"] == "done"


def test_zip_bomb_etrecord_fails_its_job_and_the_server_stays_up(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.etrecord"
    shutil.copy(EXAMPLE.etrecord, bomb)
    with zipfile.ZipFile(bomb, "a", compression=zipfile.ZIP_DEFLATED) as z, z.open("bomb", "w") as stream:
        for _ in range(64):  # 64 MiB of zeros, about 64 KiB deflated
            stream.write(bytes(1 << 20))
    assert bomb.stat().st_size < 400_000
    with running(tmp_path / "data", None, workers=1) as server:
        with Client(server.url, server.token("bomb")) as client:
            run = client.wait(client.submit("bomb", bomb, EXAMPLE.etdump, EXAMPLE.debug_buffer)["id"])
            assert run["status"] == "failed"
            assert run["reason"].startswith("bad input:") and "entry 'bomb'" in run["reason"]
            assert "max_entry_ratio" in run["reason"]
            assert httpx.get(server.url + "/healthz").json() == {"status": "ok"}
            with pytest.raises(ServiceInputError, match="failed"):
                client.fetch_report(run["id"], tmp_path / "r.html")
            assert client.wait(submit_files(client, model="after-bomb")["id"])["status"] == "done"
