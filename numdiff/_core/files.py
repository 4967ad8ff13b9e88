"""Writing files so that a reader never sees half of one: write beside it, then rename over it."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["atomic_path", "atomic_write"]


def _read_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


#: Read once at import: the umask can only be read by setting it, which is not safe among threads.
_FILE_MODE = 0o666 & ~_read_umask()


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary path beside ``path``; moved onto ``path`` when the block ends without error.

    The temporary file is removed when the block raises, so a failed write leaves no trace and
    the old ``path`` (if any) unchanged. ``os.replace`` is atomic on one file system. The file gets the
    mode a plain ``open()`` would give it (``mkstemp`` makes it private to the owner).
    """
    target = Path(os.fspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, _FILE_MODE)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write(path: str | os.PathLike[str], data: str | bytes) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` atomically; returns ``path`` as a Path."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return Path(os.fspath(path))
