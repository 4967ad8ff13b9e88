"""``python -m numdiff.service.jobs``: the worker command under its first name (the README's, for operators).

The job queue and the worker live in :mod:`numdiff.service.worker`; this only keeps the old command working.
"""

from __future__ import annotations

import sys

from numdiff.service.worker.jobs import Worker, claim, main

__all__ = ["Worker", "claim", "main"]

if __name__ == "__main__":
    sys.exit(main())
