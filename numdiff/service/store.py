"""Content-addressed artifact store: ``DATA/objects/ab/cdef...`` named by the bytes' SHA-256.

A blob is written to a temporary file in the store's own ``tmp`` directory, flushed and fsynced,
then moved into place with ``os.replace`` (atomic on one file system), so a blob is either
absent or complete. Each process writes its temporaries in a directory of its own,
``tmp/<host>-<pid>``; :meth:`Store.clean_tmp` (at start-up) removes another process's directory
only when it is stale: that process is gone (same host), or nothing in it changed for
``STALE_TMP_S`` (another host sharing the directory). So servers and ``numdiff admin`` sharing one
data directory never delete an upload in flight.
Identical bytes are stored once (an ETRecord uploaded for many runs takes its space once).
Names users give to files are never used as paths: only hashes are.

An optional quota (``NUMDIFF_SERVICE_STORE_QUOTA_MB``) bounds the bytes under ``objects/`` and
``tmp/``: a write that would pass it fails like a full disk (``OSError`` ``EDQUOT``), its
temporary file removed. Usage is measured when each blob starts, so concurrent uploads can pass
the quota by at most what they write at the same time.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import BinaryIO

from numdiff.errors import InputError

__all__ = ["STALE_TMP_S", "BlobWriter", "Store", "TooLarge"]

_HEX = re.compile(r"^[0-9a-f]{64}$")
CHUNK = 1 << 20
#: Another host's temporary directory is removed once nothing in it changed for this long (longer than any job).
STALE_TMP_S = 6 * 3600.0
_OWNER = re.compile(r"^(?P<host>.+)-(?P<pid>[0-9]+)$")


#: Serialises "make this process's temporary directory and a file in it" with "remove it when empty":
#: request threads finish uploads while others start them, and without it one thread's rmdir could
#: land between another's mkdir and its file (FileExistsError or FileNotFoundError, an HTTP 500).
_TMP_LOCK = threading.Lock()


def _new_tmp_lock() -> None:
    global _TMP_LOCK
    _TMP_LOCK = threading.Lock()  # a forked child starts with its own, never one a parent thread held


os.register_at_fork(after_in_child=_new_tmp_lock)


def _owner() -> str:
    """This process's temporary directory's name (evaluated each time: a forked child gets its own)."""
    return f"{socket.gethostname()}-{os.getpid()}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _newest_change(path: Path) -> float:
    newest = path.lstat().st_mtime
    for dirpath, dirs, files in os.walk(path):
        for name in dirs + files:
            try:
                newest = max(newest, os.lstat(os.path.join(dirpath, name)).st_mtime)
            except FileNotFoundError:
                pass
    return newest


class TooLarge(InputError):
    """A blob grew past its size limit while being written (the temporary file is removed; the API answers 413)."""


class BlobWriter:
    """Write one blob in chunks: ``write`` as the bytes arrive, then ``commit`` (or ``abort``).

    ``finish`` flushes and closes the temporary file without committing it (an upload's file parts
    wait so until the whole form has been validated).
    """

    def __init__(self, store: Store, limit: int) -> None:
        self._store = store
        self._limit = limit
        fd, name = store.temp_file("upload-")
        self._file: BinaryIO = os.fdopen(fd, "wb")
        self._path = Path(name)
        self._hash = hashlib.sha256()
        self.size = 0
        self._room = None if store.quota is None else store.quota - store.used()

    def write(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > self._limit:
            self.abort()
            raise TooLarge(f"larger than the limit of {self._limit} bytes")
        if self._room is not None and self.size > self._room:
            self.abort()
            raise OSError(errno.EDQUOT, f"the store's quota of {self._store.quota} bytes would be exceeded "
                                        "(NUMDIFF_SERVICE_STORE_QUOTA_MB)")
        self._hash.update(chunk)
        self._file.write(chunk)

    @property
    def finished(self) -> bool:
        return self._file.closed

    def finish(self) -> None:
        """All bytes are written: flush, fsync and close the temporary file (still not a blob)."""
        if not self._file.closed:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()

    def commit(self) -> str:
        """Make the blob visible under its hash and return the hash."""
        self.finish()
        digest = self._hash.hexdigest()
        self._store.place(self._path, digest)
        self._store.tidy_tmp()
        return digest

    def abort(self) -> None:
        if not self._file.closed:
            self._file.close()
        self._path.unlink(missing_ok=True)
        self._store.tidy_tmp()


class Store:
    """The blob store under ``root`` (``objects/`` and ``tmp/``; this process's temporaries in :attr:`tmp`)."""

    def __init__(self, root: str | os.PathLike[str], quota: int | None = None) -> None:
        self.root = Path(root)
        self.quota = quota
        self.objects = self.root / "objects"
        self.tmp_root = self.root / "tmp"
        self.objects.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.tmp_root.mkdir(mode=0o700, parents=True, exist_ok=True)

    @property
    def tmp(self) -> Path:
        """This process's own temporary directory (``tmp/<host>-<pid>``), created when first needed."""
        path = self.tmp_root / _owner()
        path.mkdir(mode=0o700, exist_ok=True)
        return path

    def path(self, digest: str) -> Path:
        if not _HEX.match(digest):
            raise ValueError(f"not a SHA-256 hex digest: {digest!r}")
        return self.objects / digest[:2] / digest[2:]

    def used(self) -> int:
        """Bytes under ``objects/`` and ``tmp/`` now (uploads in flight included)."""
        total = 0
        for top in (self.objects, self.tmp_root):
            for dirpath, _, files in os.walk(top):
                for name in files:
                    try:
                        total += os.stat(os.path.join(dirpath, name)).st_size
                    except FileNotFoundError:
                        pass
        return total

    def exists(self, digest: str) -> bool:
        return self.path(digest).is_file()

    def writer(self, limit: int) -> BlobWriter:
        return BlobWriter(self, limit)

    def put_bytes(self, data: bytes) -> str:
        w = self.writer(len(data))
        w.write(data)
        return w.commit()

    def put_file(self, path: str | os.PathLike[str], limit: int = 1 << 62) -> str:
        w = self.writer(limit)
        with open(path, "rb") as f:
            while chunk := f.read(CHUNK):
                w.write(chunk)
        return w.commit()

    def adopt(self, path: str | os.PathLike[str]) -> str:
        """Move a finished file that already lies in ``tmp/`` into the store under its hash (no copy).

        The file is hashed, checked against the quota, fsynced and renamed; it is gone from
        ``path`` afterwards either way (removed when the same bytes are already stored).
        """
        source = Path(path)
        if not source.resolve().is_relative_to(self.tmp_root.resolve()):
            raise ValueError(f"{source} is not inside the store's tmp directory")
        digest = hashlib.sha256()
        size = 0
        with open(source, "rb") as f:
            while chunk := f.read(CHUNK):
                digest.update(chunk)
                size += len(chunk)
            os.fsync(f.fileno())
        if self.quota is not None and self.used() > self.quota:  # the file itself is already counted in tmp/
            source.unlink(missing_ok=True)
            raise OSError(errno.EDQUOT, f"the store's quota of {self.quota} bytes would be exceeded "
                                        "(NUMDIFF_SERVICE_STORE_QUOTA_MB)")
        name = digest.hexdigest()
        self.place(source, name)
        return name

    def place(self, source: Path, digest: str) -> None:
        """Make the finished, fsynced file ``source`` (in ``tmp/``) visible under ``digest``, atomically.

        Same bytes, same name: when the blob exists already, ``source`` is just removed.
        """
        target = self.path(digest)
        try:  # stored already: make it fresh again (the orphan collector's grace starts anew), drop ours
            os.utime(target)
            source.unlink(missing_ok=True)
        except FileNotFoundError:
            target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(source, 0o600)  # results a runner wrote got the umask's mode: blobs are private
            os.replace(source, target)
            self.sync_dir(target.parent)

    def collect_orphans(self, keep: set[str], older_than_s: float) -> int:
        """Remove blobs whose hash is not in ``keep`` and that nobody stored for ``older_than_s``; how many.

        ``keep`` is every hash the database refers to, read *before* this call; a blob committed
        since is younger than the grace period (storing it, or storing the same bytes again, sets
        its time), so it is kept until its run or job row refers to it.
        """
        removed = 0
        cutoff = time.time() - older_than_s
        for prefix in self.objects.iterdir():
            if not prefix.is_dir() or len(prefix.name) != 2:
                continue
            for blob in prefix.iterdir():
                digest = prefix.name + blob.name
                if digest in keep or not _HEX.match(digest):
                    continue
                try:
                    if blob.stat().st_mtime < cutoff:
                        blob.unlink()
                        removed += 1
                except FileNotFoundError:
                    pass
        return removed

    def read_bytes(self, digest: str) -> bytes:
        return self.path(digest).read_bytes()

    def clean_tmp(self, stale_s: float = STALE_TMP_S) -> int:
        """Remove stale temporaries (left by a crash); returns how many entries of ``tmp/`` were removed.

        Another process's directory goes when that process is gone (same host) or nothing in it
        changed for ``stale_s`` (another host, or a reused process id); this process's own directory
        and every live process's stay, so uploads in flight anywhere are never touched.
        """
        removed = 0
        mine, host = _owner(), socket.gethostname()
        for entry in self.tmp_root.iterdir():
            if entry.name == mine:
                continue
            try:
                m = _OWNER.match(entry.name)
                if entry.is_dir() and not entry.is_symlink() and m is not None:
                    gone = m["host"] == host and not _alive(int(m["pid"]))
                    if gone or time.time() - _newest_change(entry) >= stale_s:
                        shutil.rmtree(entry)
                        removed += 1
                elif time.time() - entry.lstat().st_mtime >= stale_s:  # a loose file (an older numdiff's)
                    shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
                    removed += 1
            except FileNotFoundError:
                pass
        return removed

    def temp_file(self, prefix: str) -> tuple[int, str]:
        """A new temporary file in this process's directory: ``(fd, path)`` as :func:`tempfile.mkstemp` gives."""
        with _TMP_LOCK:
            return tempfile.mkstemp(dir=self.tmp, prefix=prefix)

    def temp_dir(self, prefix: str) -> Path:
        """A new temporary directory in this process's directory (:func:`tempfile.mkdtemp`)."""
        with _TMP_LOCK:
            return Path(tempfile.mkdtemp(prefix=prefix, dir=self.tmp))

    def tidy_tmp(self) -> None:
        """Remove this process's temporary directory when it is empty (it is made again when needed)."""
        with _TMP_LOCK:
            try:
                os.rmdir(self.tmp_root / _owner())
            except OSError:
                pass

    def release_tmp(self) -> None:
        """Remove this process's temporary directory (at a clean exit)."""
        shutil.rmtree(self.tmp_root / _owner(), ignore_errors=True)

    @staticmethod
    def sync_dir(path: Path) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
