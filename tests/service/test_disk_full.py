"""A full disk (or quota) during an upload: 507, nothing kept, the service goes on (in-process app)."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from numdiff.service import auth, db, store
from numdiff.service.app import create_app
from numdiff.service.server import prepare
from numdiff.service.settings import Settings
from tests.service._server import EXAMPLE


def test_disk_full_during_upload_is_507_and_keeps_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings.create(tmp_path / "data")
    prepare(settings)
    engine = db.make_engine(settings.db_url)
    with db.session_factory(engine)() as s:
        token = auth.create_token(s, "full")
    engine.dispose()
    real_write = store.BlobWriter.write

    def full(self: store.BlobWriter, chunk: bytes) -> None:
        if self.size + len(chunk) > 10_000:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_write(self, chunk)

    files = {"etrecord": ("e", EXAMPLE.etrecord.read_bytes()), "etdump": ("d", EXAMPLE.etdump.read_bytes())}
    with TestClient(create_app(settings)) as client:
        headers = {"Authorization": f"Bearer {token}"}
        monkeypatch.setattr(store.BlobWriter, "write", full)
        r = client.post("/api/v1/runs", headers=headers, data={"model": "m"}, files=files)
        assert r.status_code == 507 and "store is full" in r.json()["detail"]
        assert client.get("/api/v1/runs", headers=headers).json() == {"runs": []}
        assert not list((settings.data / "tmp").iterdir())
        assert not [p for p in (settings.data / "objects").rglob("*") if p.is_file()]
        monkeypatch.setattr(store.BlobWriter, "write", real_write)
        assert client.post("/api/v1/runs", headers=headers, data={"model": "m"}, files=files).status_code == 201
