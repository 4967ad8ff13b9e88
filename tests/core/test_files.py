"""numdiff._core.files: atomic writes leave the whole new file or the old one, never a part."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from numdiff._core.files import atomic_path, atomic_write


def test_atomic_write_replaces_the_file_with_an_ordinary_mode(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    target.write_text("old")
    atomic_write(target, "new")
    assert target.read_text() == "new"
    mask = os.umask(0o022)
    os.umask(mask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~mask
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_bytes(b"half")
        raise RuntimeError("disk full")
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bin"]
