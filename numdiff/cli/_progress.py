"""A one-line progress display on stderr for long CLI work (only when stderr is a terminal)."""

from __future__ import annotations

import sys
import time
from typing import IO

from numdiff.cli._console import is_quiet


class ProgressLine:
    """``progress(step, done, total)`` callable drawing ``step [#####.....] done/total`` in place.

    Silent when the stream is not a terminal (logs and CI stay clean) and with ``--quiet``. Call :meth:`close` at the end.
    """

    def __init__(self, stream: IO[str] | None = None, width: int = 24) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = not is_quiet() and bool(getattr(self.stream, "isatty", lambda: False)())
        self.width = width
        self.start = time.monotonic()
        self._shown = False

    def __call__(self, step: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        filled = int(self.width * done / total) if total > 0 else 0
        bar = "#" * filled + "." * (self.width - filled)
        count = f" {done}/{total}" if total > 1 else ""
        line = f"\r{step:<30.30} [{bar}]{count} {time.monotonic() - self.start:5.1f}s"
        self.stream.write(line + "\x1b[K")
        self.stream.flush()
        self._shown = True

    def close(self) -> None:
        if self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
