"""``python -m numdiff.service.worker --data DIR --db URL``: one worker process (``numdiff serve`` starts them)."""

from __future__ import annotations

import sys

from numdiff.service.worker.jobs import main

if __name__ == "__main__":
    sys.exit(main())
