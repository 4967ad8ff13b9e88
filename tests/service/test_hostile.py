"""Attacks from issue 22 ("the service holds against a hostile lab"), each against a real `numdiff serve`
on loopback where it needs one: every request loop is bounded in count and time, all traffic goes to 127.0.0.1.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import httpx
import pytest

from numdiff.service import auth, crud, db
from numdiff.service.server import prepare
from numdiff.service.settings import Settings
from numdiff.service.store import Store
from tests.service._server import EXAMPLE, Server, running
from tests.service.conftest import data_files


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _objects(data: Path) -> set[Path]:
    return {p for p in data_files(data) if p.is_relative_to(data / "objects")}


def _temporaries(data: Path) -> list[Path]:
    return [p for p in (data / "tmp").rglob("*") if p.is_file()]


# --- 1. rejected uploads leave nothing; orphan blobs are collected ---------------------------------

def test_rejected_uploads_leave_no_blob_and_cannot_fill_the_quota(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running(data, None, workers=1, NUMDIFF_SERVICE_STORE_QUOTA_MB="0.9") as server:
        token = server.token("quota-attack")
        before = _objects(data)
        for i in range(8):  # 8 x 300 kB of distinct bytes: past the 0.9 MB quota if they were kept
            junk = bytes([i + 1]) * 300_000
            bad = [{"data": {}, "files": {"etrecord": ("e", junk), "etdump": ("d", junk)}},  # no model field
                   {"data": {"model": "m", "label": "no-equals-sign"}, "files": {"etrecord": ("e", junk),
                                                                                  "etdump": ("d", junk)}},
                   {"data": {"model": "m"}, "files": {"etdump": ("d", junk)}}]  # no etrecord
            r = httpx.post(server.url + "/api/v1/runs", headers=_auth(token), timeout=30, **bad[i % 3])  # type: ignore[arg-type]
            assert r.status_code == 422, r.text
        assert _objects(data) == before
        assert not _temporaries(data)
        files = {"etrecord": ("e", EXAMPLE.etrecord.read_bytes()), "etdump": ("d", EXAMPLE.etdump.read_bytes()),
                 "debug_buffer": ("b", EXAMPLE.debug_buffer.read_bytes())}
        r = httpx.post(server.url + "/api/v1/runs", headers=_auth(token), data={"model": "m"}, files=files, timeout=30)
        assert r.status_code == 201, r.text


def test_orphan_blobs_are_collected_at_start_up_after_a_grace_period(tmp_path: Path) -> None:
    settings = Settings.create(tmp_path / "data")
    prepare(settings)
    store = Store(settings.data)
    engine = db.make_engine(settings.db_url)
    try:
        with db.session_factory(engine)() as s:
            token = auth.create_token(s, "p")
            project = auth.project_for_token(s, token)
            assert project is not None
            used = {k: store.put_bytes(k.encode() * 100) for k in ("etrecord", "etdump", "debug_buffer", "step_inputs")}
            crud.create_run(s, project.id, "m", {}, used)
    finally:
        engine.dispose()
    old_orphan, young_orphan = store.put_bytes(b"orphan, old"), store.put_bytes(b"orphan, young")
    an_hour_ago = time.time() - 3600
    for digest in (old_orphan, *used.values()):
        os.utime(store.path(digest), (an_hour_ago, an_hour_ago))
    prepare(settings)  # what `numdiff serve` and `numdiff admin create-token` run first
    assert not store.exists(old_orphan)
    assert store.exists(young_orphan) and all(store.exists(d) for d in used.values())
    again = store.put_bytes(b"orphan, young")  # stored again: fresh again, whatever its age was
    assert again == young_orphan and store.path(again).stat().st_mtime > an_hour_ago + 1800


# --- 2. temporaries belong to their process: another process's start-up never deletes an upload in flight

def _multipart(boundary: str, model: str) -> tuple[bytes, bytes]:
    """An upload's body cut in two inside the ETDump part (the second half arrives later)."""
    def part(name: str, payload: bytes, filename: str | None = None) -> bytes:
        disp = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        return f"--{boundary}\r\nContent-Disposition: {disp}\r\n\r\n".encode() + payload + b"\r\n"

    etdump = EXAMPLE.etdump.read_bytes()
    body = (part("model", model.encode()) + part("etrecord", EXAMPLE.etrecord.read_bytes(), "e")
            + part("debug_buffer", EXAMPLE.debug_buffer.read_bytes(), "b") + part("etdump", etdump, "d")
            + f"--{boundary}--\r\n".encode())
    cut = body.index(etdump) + len(etdump) // 2
    return body[:cut], body[cut:]


def test_an_upload_in_flight_survives_another_process_starting_on_the_same_data(tmp_path: Path) -> None:
    import threading

    data = tmp_path / "data"
    with running(data, None, workers=1) as server:
        token = server.token("in-flight")
        first, rest = _multipart("b0undary", "in-flight")
        half_sent, go_on = threading.Event(), threading.Event()

        def body() -> object:
            yield first
            half_sent.set()
            go_on.wait(30)
            yield rest

        answer: list[httpx.Response] = []
        sender = threading.Thread(target=lambda: answer.append(httpx.post(
            server.url + "/api/v1/runs", content=body(), timeout=60,
            headers={**_auth(token), "Content-Type": "multipart/form-data; boundary=b0undary"})))
        sender.start()
        try:
            assert half_sent.wait(30)
            deadline = time.monotonic() + 30
            while not _temporaries(data) and time.monotonic() < deadline:  # the server is writing it
                time.sleep(0.05)
            assert _temporaries(data)
            server.token("someone-else")  # `numdiff admin create-token` on the same data directory
            prepare(Settings.create(data))  # a second `numdiff serve` starting
            assert _temporaries(data)
        finally:
            go_on.set()
            sender.join(60)
        assert answer and answer[0].status_code == 201, answer[0].text if answer else "no answer"
        assert httpx.get(f"{server.url}/api/v1/runs/{answer[0].json()['id']}?wait=30", headers=_auth(token),
                         timeout=40).json()["status"] == "done"


def test_only_stale_temporaries_are_swept(tmp_path: Path) -> None:
    import socket
    import subprocess
    import sys

    store = Store(tmp_path / "data")
    host = socket.gethostname()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True, timeout=60)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        dirs = {"dead": store.tmp_root / f"{host}-{int(gone.stdout)}", "live": store.tmp_root / f"{host}-{live.pid}",
                "other host, busy": store.tmp_root / "elsewhere-1", "other host, stale": store.tmp_root / "elsewhere-2"}
        for d in dirs.values():
            d.mkdir()
            (d / "upload-x").write_bytes(b"half an upload")
        stale = time.time() - 7 * 3600
        for p in (dirs["other host, stale"] / "upload-x", dirs["other host, stale"]):
            os.utime(p, (stale, stale))
        mine = store.tmp / "upload-mine"
        mine.write_bytes(b"mine")
        assert store.clean_tmp() == 2
        assert {k for k, d in dirs.items() if d.exists()} == {"live", "other host, busy"}
        assert mine.exists()
    finally:
        live.kill()
        live.wait(30)


# --- 8. ids and names are checked before the database sees them -----------------------------------

HUGE_IDS = ["99999999999999999999", str(2**63), str(2**31), "-1", "0"]


def test_huge_ids_and_nul_names_are_404_or_422_without_a_traceback(server: Server) -> None:
    token = server.token("ids")
    assert server.log is not None
    logged = len(server.log.read_text(errors="replace"))
    answers: dict[str, int] = {}
    with httpx.Client(base_url=server.url, headers=_auth(token), cookies={"numdiff_token": token}, timeout=30) as client:
        for rid in HUGE_IDS:
            for route in ("/api/v1/runs/{}", "/api/v1/runs/{}?wait=1", "/api/v1/runs/{}/result",
                          "/api/v1/runs/{}/analysis.json", "/api/v1/runs/{}/report.html", "/api/v1/runs/{}/gap.csv",
                          "/api/v1/runs/{}/jobs/gap", "/ui/runs/{}", "/ui/runs/{}/report"):
                url = route.format(rid)
                answers[url] = client.get(url).status_code
            answers[f"compare {rid}"] = client.post("/api/v1/compare", json={"new_run": int(rid)}).status_code
            answers[f"compare base {rid}"] = client.post("/api/v1/compare",
                                                         json={"new_run": 1, "base_run": int(rid)}).status_code
            answers[f"baseline {rid}"] = client.put("/api/v1/models/m/baseline", json={"run_id": int(rid)}).status_code
        for url in ("/api/v1/runs?model=a%00b", "/api/v1/runs?status=%00", "/api/v1/runs?label=k%3Dv%00",
                    "/ui/models/a%00b", "/ui/models/a%00b/compare", "/ui/models/m/compare?by=%00"):
            answers[url] = client.get(url).status_code
        files = {"etrecord": ("e", b"e"), "etdump": ("d", b"d")}
        for fields in ({"model": "a\x00b"}, {"model": "m", "label": "k=v\x00"}, {"model": "m", "label": "k\x00=v"}):
            answers[f"upload {fields!r}"] = client.post("/api/v1/runs", data=fields, files=files).status_code
    wrong = {k: v for k, v in answers.items() if v not in (404, 422)}
    assert not wrong, wrong
    assert httpx.get(server.url + "/healthz", timeout=10).json() == {"status": "ok"}
    time.sleep(0.5)
    new_log = server.log.read_text(errors="replace")[logged:]
    assert "Traceback" not in new_log and "Exception in ASGI application" not in new_log, new_log[-3000:]


# --- 7. run reasons carry no traceback and no server path; the log has the whole story --------------

def test_a_failed_runs_reason_shows_no_server_path_and_the_log_has_it(sqlite_server: Server, tmp_path: Path) -> None:
    junk = tmp_path / "junk.etdp"
    junk.write_bytes(b"not an etdump" * 50)
    token = sqlite_server.token("reasons")
    with httpx.Client(base_url=sqlite_server.url, headers=_auth(token), timeout=60) as client:
        r = client.post("/api/v1/runs", data={"model": "junk"},
                        files={"etrecord": ("e", EXAMPLE.etrecord.read_bytes()), "etdump": ("d", junk.read_bytes())})
        run = client.get(f"/api/v1/runs/{r.json()['id']}?wait=30").json()
        client.cookies.set("numdiff_token", token)
        page = client.get(f"/ui/runs/{run['id']}").text
    assert run["status"] == "failed"
    reasons = [run["reason"], *(j["reason"] or "" for j in run["jobs"]), page]
    data = str(sqlite_server.data)
    assert all(data not in text and "/objects/" not in text and "Traceback" not in text for text in reasons)
    assert run["reason"].startswith("bad input: ETDump <etdump>: not an ETDump")
    assert sqlite_server.log is not None
    time.sleep(0.5)
    assert f"ETDump '{data}/objects/" in sqlite_server.log.read_text(errors="replace")


def test_an_internal_errors_reason_has_no_traceback_which_goes_to_the_log(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from numdiff.service.worker import child as runner

    secret = "/srv/numdiff-data/objects/ab/" + "c" * 62

    def broken(*_args: object) -> None:
        raise KeyError(f"cannot open {secret} from /usr/lib/python3/dist-packages/x.py")

    monkeypatch.setattr(runner, "run_stage", broken)
    code = runner.analyse("gap", {"etdump": secret, "etrecord": None, "debug_buffer": None}, {}, tmp_path, {}, 1 << 30)
    assert code == runner.INTERNAL
    reason = (tmp_path / "reason.txt").read_text()
    assert reason.startswith("internal error in numdiff: KeyError") and "<etdump>" in reason
    assert "Traceback" not in reason and "/srv" not in reason and "/usr/lib" not in reason
    assert "server's log" in reason
    err = capsys.readouterr().err
    assert "Traceback" in err and secret in err


# --- 11. gap.csv: cells a spreadsheet would run as formulas are neutralised -------------------------

def _with_module_path(source: Path, target: Path, module: str) -> Path:
    """A copy of ``source`` (an ETRecord) whose every node claims to come from module ``module``."""
    import json
    import zipfile

    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename in ("exported_program", "edge_dialect_exported_program/forward"):
                program = json.loads(data)
                for node in program["graph_module"]["graph"]["nodes"]:
                    if "nn_module_stack" in node.get("metadata", {}):
                        node["metadata"]["nn_module_stack"] = f"L__self___fc1,{module},torch.nn.modules.linear.Linear"
                data = json.dumps(program).encode()
            zout.writestr(info, data)
    return target


def test_gap_csv_cells_starting_like_a_formula_are_neutralised(sqlite_server: Server, tmp_path: Path) -> None:
    import csv

    formula = '=HYPERLINK("http://127.0.0.1/x")'
    evil = _with_module_path(EXAMPLE.etrecord, tmp_path / "evil.etrecord", formula)
    token = sqlite_server.token("csv")
    with httpx.Client(base_url=sqlite_server.url, headers=_auth(token), timeout=60) as client:
        r = client.post("/api/v1/runs", data={"model": "csv"},
                        files={"etrecord": ("e", evil.read_bytes()), "etdump": ("d", EXAMPLE.etdump.read_bytes()),
                               "debug_buffer": ("b", EXAMPLE.debug_buffer.read_bytes())})
        assert client.get(f"/api/v1/runs/{r.json()['id']}?wait=30").json()["status"] == "done"
        text = client.get(f"/api/v1/runs/{r.json()['id']}/gap.csv").text
    rows = list(csv.DictReader(text.splitlines()))
    assert rows and {row["module"] for row in rows} == {"'" + formula}
    risky = [cell for row in rows for key, cell in row.items()
             if key in ("aot_ops", "runtime_ops", "match", "module") and cell[:1] in ("=", "+", "-", "@", "\t", "\r")]
    assert not risky
    assert all(float(row["snr_db"]) == float(row["snr_db"]) or row["snr_db"] == "nan" for row in rows if row["snr_db"])


# --- 12. the data directory is private: 0700, the database and its WAL 0600 -------------------------

def test_the_data_directory_database_and_wal_are_private(tmp_path: Path) -> None:
    import stat

    data = tmp_path / "data"
    data.mkdir(mode=0o755)  # as an older numdiff (or a plain mkdir) left it
    os.chmod(data, 0o755)
    with running(data, None, workers=1) as server:
        token = server.token("private")
        files = {"etrecord": ("e", EXAMPLE.etrecord.read_bytes()), "etdump": ("d", EXAMPLE.etdump.read_bytes()),
                 "debug_buffer": ("b", EXAMPLE.debug_buffer.read_bytes())}
        r = httpx.post(server.url + "/api/v1/runs", headers=_auth(token), data={"model": "m"}, files=files, timeout=30)
        assert httpx.get(f"{server.url}/api/v1/runs/{r.json()['id']}?wait=30", headers=_auth(token),
                         timeout=40).json()["status"] == "done"

        def mode(p: Path) -> int:
            return stat.S_IMODE(p.stat().st_mode)

        assert mode(data) == 0o700
        db_files = [data / f"numdiff.sqlite3{s}" for s in ("", "-wal", "-shm")]
        assert all(p.exists() for p in db_files[:2])
        assert {p.name: oct(mode(p)) for p in db_files if p.exists()} == {p.name: "0o600" for p in db_files if p.exists()}
        store = [p for p in (data / "objects").rglob("*")] + [data / "objects", data / "tmp", data / "wake"]
        assert store and not [p for p in store if mode(p) & 0o077], [(p, oct(mode(p))) for p in store if mode(p) & 0o077]


# --- 13. the database password never reaches a command line ----------------------------------------

def test_the_database_password_is_not_on_any_workers_command_line(pg_server: Server, tmp_path: Path) -> None:
    from sqlalchemy import create_engine, make_url, text

    assert pg_server.db_url is not None
    admin = create_engine(make_url(pg_server.db_url).set(drivername="postgresql+psycopg"), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as c:
            c.execute(text("CREATE DATABASE numdiff_secret"))
    finally:
        admin.dispose()
    secret = "s3cret-Passw0rd"
    url = make_url(pg_server.db_url).set(database="numdiff_secret", password=secret)
    with running(tmp_path / "data", url.render_as_string(hide_password=False), workers=2) as server:
        token = server.token("secret")
        files = {"etrecord": ("e", EXAMPLE.etrecord.read_bytes()), "etdump": ("d", EXAMPLE.etdump.read_bytes()),
                 "debug_buffer": ("b", EXAMPLE.debug_buffer.read_bytes())}
        r = httpx.post(server.url + "/api/v1/runs", headers=_auth(token), data={"model": "m"}, files=files, timeout=30)
        assert httpx.get(f"{server.url}/api/v1/runs/{r.json()['id']}?wait=30", headers=_auth(token),
                         timeout=40).json()["status"] == "done"  # the workers reached the database
        pids = server.worker_pids()
        assert len(pids) == 2
        for pid in pids:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            assert "numdiff.service.worker" in argv and secret not in argv and "postgresql" not in argv, argv
            environ = Path(f"/proc/{pid}/environ")
            assert os.stat(environ).st_mode & 0o077 == 0  # only the service's user can read the environment


# --- 4. login CSRF: another origin's page cannot sign a visitor in ----------------------------------

def test_a_login_posted_from_another_origin_is_refused(sqlite_server: Server) -> None:
    token = sqlite_server.token("csrf")
    url = sqlite_server.url + "/ui/login"
    forged = [{"Origin": "http://evil.example"}, {"Origin": "null"},
              {"Referer": "http://evil.example/page.html"}, {"Sec-Fetch-Site": "cross-site"},
              {"Origin": sqlite_server.url.replace("127.0.0.1", "127.0.0.1.evil.example")},
              {"Origin": "http://127.0.0.1:1", "Sec-Fetch-Site": "same-site"}]
    for headers in forged:
        r = httpx.post(url, data={"token": token}, headers=headers, timeout=10)
        assert r.status_code == 403, (headers, r.status_code)
        assert "set-cookie" not in r.headers, headers
    for headers in ({"Origin": sqlite_server.url, "Sec-Fetch-Site": "same-origin"},
                    {"Referer": sqlite_server.url + "/ui/login"}, {}):
        r = httpx.post(url, data={"token": token}, headers=headers, timeout=10)
        assert r.status_code == 303, (headers, r.status_code)
        cookie = r.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie and "path=/ui" in cookie


# --- 14 (part). security headers; reports served in a sandbox --------------------------------------

def test_security_headers_and_reports_in_a_sandbox(sqlite_server: Server) -> None:
    token = sqlite_server.token("headers")
    with httpx.Client(base_url=sqlite_server.url, headers=_auth(token), cookies={"numdiff_token": token},
                      timeout=60) as client:
        files = {"etrecord": ("e", EXAMPLE.etrecord.read_bytes()), "etdump": ("d", EXAMPLE.etdump.read_bytes()),
                 "debug_buffer": ("b", EXAMPLE.debug_buffer.read_bytes())}
        rid = client.post("/api/v1/runs", data={"model": "m"}, files=files).json()["id"]
        assert client.get(f"/api/v1/runs/{rid}?wait=30").json()["status"] == "done"
        for url in ("/healthz", "/ui", "/ui/login", f"/ui/runs/{rid}", "/api/v1/runs", "/api/v1/runs/99"):
            r = client.get(url)
            assert r.headers["x-content-type-options"] == "nosniff", url
            assert r.headers["x-frame-options"] == "DENY", url
            assert "content-security-policy" not in r.headers or "sandbox" not in r.headers["content-security-policy"]
        for url in (f"/ui/runs/{rid}/report", f"/api/v1/runs/{rid}/report.html"):
            r = client.get(url)
            assert r.status_code == 200 and r.text.startswith("<!DOCTYPE html>"), url
            assert r.headers["content-security-policy"].startswith("sandbox allow-scripts"), url
            assert "allow-same-origin" not in r.headers["content-security-policy"]
            assert r.headers["x-frame-options"] == "SAMEORIGIN" and r.headers["x-content-type-options"] == "nosniff"
