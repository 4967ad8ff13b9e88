"""Bearer tokens scoped to one project, stored as SHA-256 hashes (the token itself is shown once).

``numdiff admin create-token --project NAME [--expires-days N]`` creates the project if needed and
prints a new token (refused after N days when given); ``numdiff admin revoke-token TOKEN`` (or its
prefix) revokes it. A request without a valid token gets 401; objects of another project are
answered 404, exactly as objects that do not exist.

A browser signs in with a token once and gets a *session*: a random id in its cookie (only the id's
SHA-256 is stored), valid for :data:`SESSION_MAX_AGE_S`, until it signs out, and only while its
token is valid; the token itself never sits in the browser.
"""

from __future__ import annotations

import datetime
import hashlib
import secrets
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from numdiff.service import db

__all__ = ["SESSION_MAX_AGE_S", "create_token", "end_session", "hash_token", "project_for_session",
           "project_for_token", "revoke_token", "start_session"]

PREFIX = "ndt_"
#: How long a browser stays signed in (the cookie's Max-Age and the session row's expiry): 12 hours.
SESSION_MAX_AGE_S = 12 * 3600


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def create_token(session: Session, project_name: str, expires_days: float | None = None) -> str:
    """A new token for ``project_name`` (created if it does not exist), refused after ``expires_days``; commits."""
    project = session.execute(select(db.Project).where(db.Project.name == project_name)).scalar_one_or_none()
    if project is None:
        project = db.Project(name=project_name, created=db.now())
        session.add(project)
        session.flush()
    token = PREFIX + secrets.token_urlsafe(32)
    created = db.now()
    expires = None if expires_days is None else created + datetime.timedelta(days=expires_days)
    session.add(db.Token(project_id=project.id, sha256=hash_token(token), prefix=token[:12], created=created,
                         expires=expires))
    session.commit()
    return token


def revoke_token(session: Session, token_or_prefix: str) -> int:
    """Revoke the token (given whole, or by the 12-character prefix ``create-token`` prints); how many were revoked."""
    rows = session.execute(select(db.Token).where(db.Token.revoked.is_(None))).scalars().all()
    hit = [t for t in rows if t.sha256 == hash_token(token_or_prefix)
           or (len(token_or_prefix) >= 12 and t.prefix == token_or_prefix[:12] and len(token_or_prefix) == 12)]
    for t in hit:
        t.revoked = db.now()
    session.commit()
    return len(hit)


def _valid(row: db.Token | None) -> db.Token | None:
    if row is None or row.revoked is not None or (row.expires is not None and row.expires <= db.now()):
        return None
    return row


def _token_row(session: Session, token: str | None) -> db.Token | None:
    if not token:
        return None
    return _valid(session.execute(select(db.Token).where(db.Token.sha256 == hash_token(token))).scalar_one_or_none())


def project_for_token(session: Session, token: str | None) -> db.Project | None:
    """The project of a valid token (not revoked, not expired), else None."""
    row = _token_row(session, token)
    project: db.Project | None = None if row is None else session.get(db.Project, row.project_id)
    return project


def start_session(session: Session, token: str) -> str | None:
    """A new browser session signed in with ``token`` (its id, for the cookie), or None for an invalid token; commits."""
    row = _token_row(session, token)
    if row is None:
        return None
    session_id = secrets.token_urlsafe(32)
    t = db.now()
    session.execute(delete(db.WebSession).where(db.WebSession.expires <= t))  # sweep the expired ones
    session.add(db.WebSession(sha256=hash_token(session_id), token_id=row.id, created=t,
                              expires=t + datetime.timedelta(seconds=SESSION_MAX_AGE_S)))
    session.commit()
    return session_id


def project_for_session(session: Session, session_id: str | None) -> db.Project | None:
    """The project of a live browser session (not expired, signed in with a token still valid), else None."""
    if not session_id:
        return None
    web = session.execute(select(db.WebSession).where(db.WebSession.sha256 == hash_token(session_id))
                          ).scalar_one_or_none()
    if web is None or web.expires <= db.now():
        return None
    row = _valid(session.get(db.Token, web.token_id))
    project: db.Project | None = None if row is None else session.get(db.Project, row.project_id)
    return project


def end_session(session: Session, session_id: str | None) -> None:
    """Sign a browser session out (its row is deleted: the id is worthless from now on); commits."""
    if session_id:
        session.execute(delete(db.WebSession).where(db.WebSession.sha256 == hash_token(session_id)))
        session.commit()
