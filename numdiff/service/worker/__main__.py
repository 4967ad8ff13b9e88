"""``python -m numdiff.service.worker --data DIR``: one worker process (``numdiff serve`` starts them; the
database URL comes in ``NUMDIFF_SERVICE_DB_URL``, never on the command line)."""

from __future__ import annotations

import sys

from numdiff.service.worker.jobs import main

if __name__ == "__main__":
    sys.exit(main())
