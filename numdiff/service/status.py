"""The state of a run and of each of its jobs: one string enum, the values stored in SQL and sent by the API."""

from __future__ import annotations

import enum
import sys

__all__ = ["Status"]

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # pragma: no cover - Python 3.10

    class StrEnum(str, enum.Enum):
        """``enum.StrEnum`` before Python 3.11: members are their string values."""

        def __str__(self) -> str:
            return str(self.value)

        def __format__(self, spec: str) -> str:
            return str(self.value).__format__(spec)


class Status(StrEnum):
    """The state of a run and of each of its jobs, as stored in SQL and answered by the API.

    ``queued`` → ``running`` → ``done`` | ``failed``; a running job whose lease ran out is queued again.
    """

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
