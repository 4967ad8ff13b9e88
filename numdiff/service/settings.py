"""Settings of one service instance: where data lives, the database, limits on uploads and jobs.

Every limit has a documented default and an environment variable (read at start-up):

=============================================  =========================  =========
variable                                       meaning                    default
=============================================  =========================  =========
``NUMDIFF_SERVICE_MAX_UPLOAD_MB``              largest file of an upload  1024
``NUMDIFF_SERVICE_JOB_MEMORY_MB``              address space of a job     8192
``NUMDIFF_SERVICE_JOB_TIMEOUT_S``              wall time of a job         600
``NUMDIFF_SERVICE_LEASE_S``                    a worker's lease on a job  30
``NUMDIFF_SERVICE_MAX_ATTEMPTS``               tries before a job fails   3
``NUMDIFF_SERVICE_STORE_QUOTA_MB``             bytes the store may hold   no quota
``NUMDIFF_SERVICE_DB_URL``                     database when no ``--db``  SQLite in DATA
``NUMDIFF_SERVICE_REQUEST_TIMEOUT_S``          headers complete within;   10
                                               a body's grace
``NUMDIFF_SERVICE_MAX_CONNECTIONS_PER_CLIENT`` open connections from one  100
                                               client address
=============================================  =========================  =========

A request's body must then average 1 KiB/s (see :mod:`numdiff.service.connections`).

``NUMDIFF_SERVICE_DB_URL`` keeps a database password out of the process list: ``numdiff serve``
hands the URL to its workers this way (never on their command line), and operators can too.

A worker renews its lease every third of ``LEASE_S``; a job whose worker died (lease run out) is
picked up again by another worker, up to ``MAX_ATTEMPTS`` times.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from numdiff.errors import UsageError

__all__ = ["DB_URL_ENV", "Settings"]

#: The environment variable that carries the database URL (to the workers, and from operators who prefer it to --db).
DB_URL_ENV = "NUMDIFF_SERVICE_DB_URL"


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise UsageError(f"{name}={raw!r} is not a number\nSet it to a number such as {default:g}, or unset it.") from None
    if not value > 0:
        raise UsageError(f"{name}={raw!r} must be greater than 0\nSet it to a number such as {default:g}, or unset it.")
    return value


@dataclass(frozen=True, slots=True)
class Settings:
    data: Path
    db_url: str
    max_upload_bytes: int
    job_memory_bytes: int
    job_timeout_s: float
    lease_s: float
    max_attempts: int
    store_quota_bytes: int | None = None
    request_timeout_s: float = 10.0
    max_connections_per_client: int = 100

    @classmethod
    def create(cls, data: str | os.PathLike[str], db_url: str | None = None) -> Settings:
        from numdiff.service.db import default_url

        root = Path(data).resolve()
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:  # private to the service's user: it holds project names, labels, token hashes and uploads
            root.chmod(0o700)
        except OSError:  # not ours to change (another user's directory): leave it as its owner set it
            pass
        return cls(data=root, db_url=db_url or os.environ.get(DB_URL_ENV) or default_url(root),
                   max_upload_bytes=int(_env_float("NUMDIFF_SERVICE_MAX_UPLOAD_MB", 1024) * (1 << 20)),
                   job_memory_bytes=int(_env_float("NUMDIFF_SERVICE_JOB_MEMORY_MB", 8192) * (1 << 20)),
                   job_timeout_s=_env_float("NUMDIFF_SERVICE_JOB_TIMEOUT_S", 600),
                   lease_s=_env_float("NUMDIFF_SERVICE_LEASE_S", 30),
                   max_attempts=int(_env_float("NUMDIFF_SERVICE_MAX_ATTEMPTS", 3)),
                   store_quota_bytes=(int(_env_float("NUMDIFF_SERVICE_STORE_QUOTA_MB", 1.0) * (1 << 20))
                                      if os.environ.get("NUMDIFF_SERVICE_STORE_QUOTA_MB") else None),
                   request_timeout_s=_env_float("NUMDIFF_SERVICE_REQUEST_TIMEOUT_S", 10),
                   max_connections_per_client=max(1, int(_env_float("NUMDIFF_SERVICE_MAX_CONNECTIONS_PER_CLIENT", 100))))
