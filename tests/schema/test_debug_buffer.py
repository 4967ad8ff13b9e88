"""Debug buffer: every scalar type, strides, bounds, and the missing-buffer placeholder."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from numdiff.errors import DebugBufferError, ETDumpError
from numdiff.schema.debug_buffer import DTYPES, DebugBuffer, MissingTensor, inflate_value
from numdiff.schema.etdump import ScalarType, Tensor, Value, ValueType


def _buffer(tmp_path: Path, payload: bytes, pad: int = 64) -> DebugBuffer:
    path = tmp_path / "debug.bin"
    path.write_bytes(b"\xee" * 16 + payload + b"\x00" * pad)
    return DebugBuffer(path)


@pytest.mark.parametrize("scalar_type", list(DTYPES))
def test_every_scalar_type_round_trips(tmp_path: Path, scalar_type: ScalarType) -> None:
    dtype = getattr(torch, DTYPES[scalar_type][0])
    src = (torch.arange(6) % 2).to(dtype) if dtype.is_floating_point or dtype == torch.bool else torch.arange(6).to(dtype)
    src = src.reshape(2, 3)
    raw = src.contiguous().view(torch.uint8).numpy().tobytes()
    buf = _buffer(tmp_path, raw)
    got = buf.tensor(Tensor(int(scalar_type), (2, 3), (3, 1), 16))
    assert got.dtype == dtype and got.shape == (2, 3)
    assert torch.equal(got.view(torch.uint8), src.view(torch.uint8))


def test_strides_are_honoured(tmp_path: Path) -> None:
    logical = torch.arange(24, dtype=torch.float32).reshape(1, 2, 3, 4)
    channels_last = logical.contiguous(memory_format=torch.channels_last)
    storage = channels_last.permute(0, 2, 3, 1).contiguous()  # the bytes as laid out in memory
    buf = _buffer(tmp_path, storage.numpy().tobytes())
    got = buf.tensor(Tensor(int(ScalarType.FLOAT), (1, 2, 3, 4), tuple(channels_last.stride()), 16))
    assert torch.equal(got, logical)


def test_views_are_writable_without_touching_the_file(tmp_path: Path) -> None:
    buf = _buffer(tmp_path, torch.ones(4).numpy().tobytes())
    before = Path(buf.path).read_bytes()
    t = buf.tensor(Tensor(int(ScalarType.FLOAT), (4,), (1,), 16))
    t.add_(1)
    assert Path(buf.path).read_bytes() == before


def test_tensor_past_the_end_names_file_offset_and_sizes(tmp_path: Path) -> None:
    buf = _buffer(tmp_path, b"", pad=8)
    with pytest.raises(DebugBufferError, match=r"debug\.bin.*offset 16 needs 40 bytes, past the end of the 24-byte buffer"):
        buf.tensor(Tensor(int(ScalarType.FLOAT), (10,), (1,), 16))


def test_unknown_scalar_type_is_named(tmp_path: Path) -> None:
    buf = _buffer(tmp_path, b"\x00" * 8)
    with pytest.raises(ETDumpError, match="unknown scalar type 99"):
        buf.tensor(Tensor(99, (1,), (1,), 16))


def test_missing_file_is_a_debug_buffer_error(tmp_path: Path) -> None:
    with pytest.raises(DebugBufferError, match="nope.bin.*cannot be opened"):
        DebugBuffer(tmp_path / "nope.bin")


def test_without_a_buffer_tensors_are_placeholders_not_zeros() -> None:
    v = Value(ValueType.TENSOR, tensor=Tensor(int(ScalarType.FLOAT), (2, 2), (2, 1), 0))
    got = inflate_value(v, None)
    assert isinstance(got, MissingTensor) and got.shape == (2, 2) and "no debug buffer" in repr(got)


def test_equal_bytes_compare_without_building_tensors(tmp_path: Path) -> None:
    buf = _buffer(tmp_path, bytes(range(8)) * 2)
    a = Tensor(int(ScalarType.BYTE), (8,), (1,), 16)
    b = Tensor(int(ScalarType.BYTE), (8,), (1,), 24)
    c = Tensor(int(ScalarType.BYTE), (7,), (1,), 17)
    assert buf.tensors_equal(a, b) and not buf.tensors_equal(a, c)


def _rss_pages() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1])


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs Linux /proc")
def test_buffers_share_one_pagemap_descriptor(tmp_path: Path) -> None:
    """Each buffer used to open /proc/self/pagemap and never close it: a test run of many Inspectors ran
    out of descriptors (select() refuses one past 1023)."""
    import gc

    path = tmp_path / "small.bin"
    path.write_bytes(torch.arange(1024, dtype=torch.float32).numpy().tobytes())
    spec = Tensor(int(ScalarType.FLOAT), (1024,), (1,), 0)
    first = DebugBuffer(path)
    first.release(first.tensor(spec))  # opens the process's pagemap, if the platform has one
    del first
    gc.collect()
    before = len(list(Path("/proc/self/fd").iterdir()))
    for _ in range(50):
        buf = DebugBuffer(path)
        buf.release(buf.tensor(spec))
        del buf
    gc.collect()
    assert len(list(Path("/proc/self/fd").iterdir())) <= before


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="needs Linux /proc")
def test_release_drops_pages_but_never_changes_values(tmp_path: Path) -> None:
    n = 4 << 20  # 16 MiB of float32
    path = tmp_path / "big.bin"
    path.write_bytes(torch.arange(n, dtype=torch.float32).numpy().tobytes())
    buf = DebugBuffer(path)
    t = buf.tensor(Tensor(int(ScalarType.FLOAT), (n,), (1,), 0))
    before = _rss_pages()
    assert float(t.sum()) > 0  # touch every page
    t[5] = -1.0  # a private (copy-on-write) change the release must keep
    touched = _rss_pages()
    buf.release(t)
    assert _rss_pages() < touched - (8 << 20) // 4096  # most of the 16 MiB left the process
    assert float(t[5]) == -1.0 and float(t[6]) == 6.0 and float(t[n - 1]) == float(n - 1)
    assert before <= touched
    assert Path(path).read_bytes()[20:24] == torch.tensor([5.0]).numpy().tobytes()  # the file is untouched


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="needs Linux /proc")
def test_adjacent_releases_are_dropped_together(tmp_path: Path) -> None:
    mib = 1 << 18  # float32 elements in 1 MiB
    path = tmp_path / "big.bin"
    path.write_bytes(torch.arange(40 * mib, dtype=torch.float32).numpy().tobytes())
    buf = DebugBuffer(path)
    parts = [buf.tensor(Tensor(int(ScalarType.FLOAT), (mib,), (1,), i * mib * 4)) for i in range(40)]
    assert sum(float(p[0]) for p in parts) > 0 and all(float(p.sum()) > 0 for p in parts)  # every page in
    parts[3][7] = -1.0  # a private (copy-on-write) change inside the batch: it must survive the drop
    touched = _rss_pages()
    for p in parts[:7]:
        buf.release(p)
    assert _rss_pages() > touched - (2 << 20) // 4096  # 7 MiB waiting: still mapped
    buf.release(parts[7])  # 8 MiB together: dropped
    dropped = _rss_pages()
    assert dropped < touched - (4 << 20) // 4096  # most of the 8 MiB left the process
    buf.release(parts[30])  # elsewhere: waits alone
    buf.release(parts[20])  # not adjacent to 30: 30 is dropped, 20 waits
    assert _rss_pages() < dropped - (512 << 10) // 4096
    assert [float(p[0]) for p in parts] == [float(i * mib) for i in range(40)]  # values never change
    assert float(parts[3][7]) == -1.0 and float(parts[3][8]) == float(3 * mib + 8)
