"""Bearer tokens scoped to one project, stored as SHA-256 hashes (the token itself is shown once).

``numdiff admin create-token --project NAME`` creates the project if needed and prints a new
token; ``numdiff admin revoke-token TOKEN`` (or its prefix) revokes it. A request without a valid
token gets 401; objects of another project are answered 404, exactly as objects that do not exist.
"""

from __future__ import annotations

import hashlib
import secrets
from sqlalchemy import select
from sqlalchemy.orm import Session

from numdiff.service import db

__all__ = ["create_token", "hash_token", "project_for_token", "revoke_token"]

PREFIX = "ndt_"


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def create_token(session: Session, project_name: str) -> str:
    """A new token for ``project_name`` (created if it does not exist); commits."""
    project = session.execute(select(db.Project).where(db.Project.name == project_name)).scalar_one_or_none()
    if project is None:
        project = db.Project(name=project_name, created=db.now())
        session.add(project)
        session.flush()
    token = PREFIX + secrets.token_urlsafe(32)
    session.add(db.Token(project_id=project.id, sha256=hash_token(token), prefix=token[:12], created=db.now()))
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


def project_for_token(session: Session, token: str | None) -> db.Project | None:
    """The project of a valid, unrevoked token, else None."""
    if not token:
        return None
    row = session.execute(select(db.Token).where(db.Token.sha256 == hash_token(token))).scalar_one_or_none()
    if row is None or row.revoked is not None:
        return None
    project: db.Project | None = session.get(db.Project, row.project_id)
    return project
