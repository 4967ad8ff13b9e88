"""Issue 22, item 14 (the rest): the browser's cookie holds a session id, not the token; sessions
expire (Max-Age) and sign out (``POST /ui/logout``, refused from another origin); tokens may expire
(``numdiff admin create-token --expires-days N``); ``/docs`` needs no CDN. Against a real
``numdiff serve`` on loopback.
"""

from __future__ import annotations

import datetime
import re

import httpx
import pytest
import sqlalchemy as sa

from numdiff.cli import main
from numdiff.service import auth, db
from numdiff.service.settings import Settings
from tests.service._server import Server, sign_in


def _sql(server: Server, statement: str, **params: object) -> None:
    engine = db.make_engine(Settings.create(server.data, server.db_url).db_url)
    try:
        with engine.begin() as c:
            c.execute(sa.text(statement), params)
    finally:
        engine.dispose()


def test_the_cookie_holds_a_session_id_with_max_age_never_the_token(sqlite_server: Server) -> None:
    token = sqlite_server.token("sessions")
    r = httpx.post(sqlite_server.url + "/ui/login", data={"token": token}, timeout=30)
    assert r.status_code == 303
    cookie = r.headers["set-cookie"]
    assert token not in cookie and token[4:20] not in cookie
    assert re.search(r"(?i)max-age=43200", cookie) and "httponly" in cookie.lower() and "samesite=strict" in cookie.lower()
    session_id = r.cookies["numdiff_session"]
    assert httpx.get(sqlite_server.url + "/ui", cookies={"numdiff_session": session_id}, timeout=30).status_code == 200
    for raw in ({"numdiff_session": token}, {"numdiff_token": token}):  # the token itself is no cookie
        assert httpx.get(sqlite_server.url + "/ui", cookies=raw, timeout=30).status_code == 303
    # a session past its expiry is refused, whatever the browser keeps
    _sql(sqlite_server, "UPDATE web_sessions SET expires = :t WHERE sha256 = :h",
         t=datetime.datetime(2000, 1, 1), h=auth.hash_token(session_id))
    assert httpx.get(sqlite_server.url + "/ui", cookies={"numdiff_session": session_id}, timeout=30).status_code == 303


def test_sign_out_ends_the_session_and_is_refused_from_another_origin(sqlite_server: Server) -> None:
    token = sqlite_server.token("sign-out")
    cookies = sign_in(sqlite_server.url, token)
    page = httpx.get(sqlite_server.url + "/ui", cookies=cookies, timeout=30)
    assert page.status_code == 200 and 'action="/ui/logout"' in page.text
    forged = httpx.post(sqlite_server.url + "/ui/logout", cookies=cookies, headers={"Origin": "http://evil.example"},
                        timeout=30)
    assert forged.status_code == 403
    assert httpx.get(sqlite_server.url + "/ui", cookies=cookies, timeout=30).status_code == 200
    out = httpx.post(sqlite_server.url + "/ui/logout", cookies=cookies, headers={"Origin": sqlite_server.url},
                     timeout=30)
    assert out.status_code == 303 and out.headers["location"] == "/ui/login"
    assert 'numdiff_session=""' in out.headers["set-cookie"] or "max-age=0" in out.headers["set-cookie"].lower()
    assert httpx.get(sqlite_server.url + "/ui", cookies=cookies, timeout=30).status_code == 303  # the id is dead
    # revoking the token ends the sessions signed in with it
    cookies = sign_in(sqlite_server.url, token)
    engine = db.make_engine(Settings.create(sqlite_server.data).db_url)
    try:
        with db.session_factory(engine)() as s:
            assert auth.revoke_token(s, token) == 1
    finally:
        engine.dispose()
    assert httpx.get(sqlite_server.url + "/ui", cookies=cookies, timeout=30).status_code == 303


def test_tokens_expire_when_created_with_expires_days(sqlite_server: Server, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--data", str(sqlite_server.data)]
    assert main(["admin", "create-token", *argv, "--project", "expiring", "--expires-days", "0"]) == 2
    assert "--expires-days" in capsys.readouterr().err
    assert main(["admin", "create-token", *argv, "--project", "expiring", "--expires-days", "30"]) == 0
    out, err = capsys.readouterr()
    token = out.strip().splitlines()[-1]
    assert "valid for 30 day(s)" in err
    headers = {"Authorization": f"Bearer {token}"}
    assert httpx.get(sqlite_server.url + "/api/v1/project", headers=headers, timeout=30).status_code == 200
    cookies = sign_in(sqlite_server.url, token)
    _sql(sqlite_server, "UPDATE tokens SET expires = :t WHERE sha256 = :h", t=datetime.datetime(2000, 1, 1),
         h=auth.hash_token(token))
    assert httpx.get(sqlite_server.url + "/api/v1/project", headers=headers, timeout=30).status_code == 401
    assert httpx.get(sqlite_server.url + "/ui", cookies=cookies, timeout=30).status_code == 303  # its sessions too
    r = httpx.post(sqlite_server.url + "/ui/login", data={"token": token}, timeout=30)
    assert r.status_code == 401 and "set-cookie" not in r.headers


def test_docs_are_served_by_numdiff_without_a_cdn(sqlite_server: Server) -> None:
    r = httpx.get(sqlite_server.url + "/docs", timeout=30)
    assert r.status_code == 200 and "/api/v1/runs" in r.text and "/openapi.json" in r.text
    assert not re.search(r"""<script[^>]*\bsrc=|\b(?:src|href)=["']?(?:https?:)?//""", r.text), "a third party's asset"
    assert httpx.get(sqlite_server.url + "/redoc", timeout=30).status_code == 404
