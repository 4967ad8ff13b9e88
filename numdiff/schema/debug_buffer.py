"""The debug buffer: raw bytes of the tensors an ETDump's debug events point at.

The runtime writes the buffer at its full allocated size, mostly zeros after the used part, so it
is memory-mapped, never read whole. The mapping is copy-on-write (``mmap.ACCESS_COPY``): tensors
are zero-copy views that a user may even write to without changing the file, and torch does not
warn about read-only buffers.

Example:
    >>> from numdiff.schema.debug_buffer import DebugBuffer
    >>> buf = DebugBuffer("debug_buffer.bin")  # doctest: +SKIP
    >>> buf.tensor(value.tensor)  # doctest: +SKIP
    tensor([[...]])
"""

from __future__ import annotations

import math
import mmap
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from numdiff.errors import DebugBufferError, ETDumpError, MissingDataError
from numdiff.schema.etdump import ScalarType, Tensor, Value, ValueType

if TYPE_CHECKING:
    import torch

__all__ = ["DTYPES", "DebugBuffer", "MissingTensor", "inflate_value", "torch_dtype"]

#: ScalarType → (torch dtype attribute name, bytes per element). Quantized types are given as
#: their integer representation (the dump carries no scale or zero point); the packed
#: QUINT4X2 / QUINT2X4 types as their raw bytes.
DTYPES: dict[ScalarType, tuple[str, int]] = {
    ScalarType.BYTE: ("uint8", 1),
    ScalarType.CHAR: ("int8", 1),
    ScalarType.SHORT: ("int16", 2),
    ScalarType.INT: ("int32", 4),
    ScalarType.LONG: ("int64", 8),
    ScalarType.HALF: ("float16", 2),
    ScalarType.FLOAT: ("float32", 4),
    ScalarType.DOUBLE: ("float64", 8),
    ScalarType.BOOL: ("bool", 1),
    ScalarType.QINT8: ("int8", 1),
    ScalarType.QUINT8: ("uint8", 1),
    ScalarType.QINT32: ("int32", 4),
    ScalarType.BFLOAT16: ("bfloat16", 2),
    ScalarType.QUINT4X2: ("uint8", 1),
    ScalarType.QUINT2X4: ("uint8", 1),
    ScalarType.BITS16: ("uint16", 2),
    ScalarType.FLOAT8E5M2: ("float8_e5m2", 1),
    ScalarType.FLOAT8E4M3FN: ("float8_e4m3fn", 1),
    ScalarType.FLOAT8E5M2FNUZ: ("float8_e5m2fnuz", 1),
    ScalarType.FLOAT8E4M3FNUZ: ("float8_e4m3fnuz", 1),
    ScalarType.UINT16: ("uint16", 2),
    ScalarType.UINT32: ("uint32", 4),
    ScalarType.UINT64: ("uint64", 8),
}


def torch_dtype(scalar_type: int) -> tuple[torch.dtype, int]:
    """The torch dtype and element size of an ETDump scalar type."""
    import torch

    try:
        name, size = DTYPES[ScalarType(scalar_type)]
    except ValueError as e:
        raise ETDumpError(None, f"tensor has unknown scalar type {scalar_type}",
                          f"Known types: {', '.join(t.name for t in ScalarType)}.") from e
    return getattr(torch, name), size


@dataclass(frozen=True, slots=True)
class MissingTensor:
    """Stands in for a logged tensor whose bytes are unavailable (no debug buffer was given).

    The reference fills such tensors with zeros, which then compare as real numbers; numdiff keeps
    the shape and dtype and refuses to compute with it.
    """

    dtype: str
    sizes: tuple[int, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        return self.sizes

    def __repr__(self) -> str:
        return f"MissingTensor({self.dtype}{list(self.sizes)}: no debug buffer given)"


class DebugBuffer:
    """A memory-mapped debug buffer.

    Args:
        path: The debug buffer file the runtime wrote next to the ETDump.

    Raises:
        DebugBufferError: The file cannot be opened.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        try:
            with open(self.path, "rb") as f:
                self.size = os.fstat(f.fileno()).st_size
                self._map: mmap.mmap | bytes = (
                    mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY) if self.size else b""
                )
        except OSError as e:
            raise DebugBufferError(self.path, f"cannot be opened: {e.strerror or e}",
                                   "Pass the debug buffer file the runtime wrote with this ETDump.") from e

        self._base = _address_of(self._map) if self.size else 0
        self._can_release = self._base != 0
        self._pagemap = _open_pagemap() if self._can_release else None

    def __repr__(self) -> str:
        return f"DebugBuffer({self.path!r}, {self.size} bytes)"

    def release(self, value: Any) -> None:
        """Drop the resident pages behind tensors of this buffer from this process.

        Pages only read are unmapped with ``MADV_DONTNEED`` (they stay in the page cache and are
        mapped again if touched). Pages a user wrote to are private copies that ``MADV_DONTNEED``
        would throw away, so ranges holding any (``/proc/self/pagemap`` tells) get
        ``MADV_PAGEOUT`` instead, which keeps them. No value ever changes. This keeps a
        comparison over hundreds of MB of logged tensors from holding them all in memory.
        Values that are not views of this buffer are ignored; where the kernel or platform offers
        neither, this does nothing.
        """
        if not self._can_release:
            return
        for t in value if isinstance(value, (list, tuple)) else (value,):
            if not hasattr(t, "data_ptr") or not hasattr(t, "untyped_storage"):
                continue
            start = t.data_ptr() - self._base
            if not 0 <= start < self.size:
                continue
            end = min(self.size, start + t.untyped_storage().nbytes())
            first = start - start % mmap.PAGESIZE
            advice = _MADV_PAGEOUT if self._has_private_pages(first, end) else mmap.MADV_DONTNEED
            try:
                self._map.madvise(advice, first, end - first)  # type: ignore[union-attr]
            except (OSError, ValueError, AttributeError):
                self._can_release = False

    def _has_private_pages(self, first: int, end: int) -> bool:
        """Whether ``[first, end)`` holds pages this process wrote to (copy-on-write copies)."""
        if self._pagemap is None:
            return True
        page = mmap.PAGESIZE
        count = (end - first + page - 1) // page
        try:
            raw = os.pread(self._pagemap, 8 * count, (self._base + first) // page * 8)
        except OSError:
            self._pagemap = None
            return True
        import numpy as np

        entries = np.frombuffer(raw, dtype=np.uint64)
        present, file_backed = (entries >> np.uint64(63)) & np.uint64(1), (entries >> np.uint64(61)) & np.uint64(1)
        return bool(np.any(present & (np.uint64(1) - file_backed)))

    def view(self, offset: int, nbytes: int) -> memoryview:
        """Raw bytes ``[offset, offset + nbytes)``, checked against the buffer's size."""
        self._check(offset, nbytes, "bytes")
        return memoryview(self._map)[offset : offset + nbytes]

    def _check(self, offset: int, nbytes: int, what: str) -> None:
        if offset < 0 or offset + nbytes > self.size:
            raise DebugBufferError(
                self.path,
                f"{what} at offset {offset} needs {nbytes} bytes, past the end of the {self.size}-byte buffer",
                "The debug buffer does not belong to this ETDump, or was cut short: pass the buffer "
                "written in the same run, and make the runtime's debug buffer large enough.",
            )

    def tensor(self, t: Tensor) -> torch.Tensor:
        """The tensor ``t`` describes, as a zero-copy view honouring its sizes and strides."""
        import torch

        dtype, itemsize = torch_dtype(t.scalar_type)
        sizes = list(t.sizes)
        if any(s < 0 for s in sizes):
            raise DebugBufferError(self.path, f"tensor at offset {t.offset} has negative sizes {sizes}",
                                   "The ETDump is corrupt.")
        numel = math.prod(sizes)
        if numel == 0:
            return torch.empty(sizes, dtype=dtype)
        strides = list(t.strides)
        contiguous = _contiguous_strides(sizes)
        if len(strides) != len(sizes) or strides == contiguous:
            strides, extent = contiguous, numel
        elif any(s < 0 for s in strides):
            raise DebugBufferError(self.path, f"tensor at offset {t.offset} has negative strides {strides}",
                                   "The ETDump is corrupt.")
        else:
            extent = 1 + sum((n - 1) * s for n, s in zip(sizes, strides, strict=True))
        what = f"{dtype} tensor of shape {tuple(sizes)}"
        self._check(t.offset, extent * itemsize, what)
        flat = torch.frombuffer(self._map, dtype=dtype, count=extent, offset=t.offset)
        if strides is contiguous:
            return flat.view(sizes)
        return flat.as_strided(sizes, strides)

    def tensors_equal(self, a: Tensor, b: Tensor) -> bool:
        """Whether two logged tensors have the same type, shape and bytes (no tensor is built)."""
        if (a.scalar_type, a.sizes, a.strides) != (b.scalar_type, b.sizes, b.strides):
            return False
        _, itemsize = torch_dtype(a.scalar_type)
        n = math.prod(a.sizes) * itemsize
        return n == 0 or self.view(a.offset, n) == self.view(b.offset, n)


#: Linux's MADV_PAGEOUT (5.4+); Python's mmap module does not always export the constant.
_MADV_PAGEOUT = getattr(mmap, "MADV_PAGEOUT", 21)


def _open_pagemap() -> int | None:
    try:
        return os.open("/proc/self/pagemap", os.O_RDONLY)
    except OSError:
        return None


def _address_of(mapping: mmap.mmap | bytes) -> int:
    """Start address of a writable mapping (0 when it cannot be had)."""
    import ctypes

    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(mapping))
    except (TypeError, ValueError):
        return 0


def _contiguous_strides(sizes: list[int]) -> list[int]:
    strides, acc = [], 1
    for n in reversed(sizes):
        strides.append(acc)
        acc *= max(n, 1)
    return strides[::-1]


def inflate_value(value: Value, buffer: DebugBuffer | None, *, where: str = "") -> Any:
    """A logged value as Python data: tensor, list of tensors, int, bool, float, str or None.

    Without a debug buffer, tensors come back as ``MissingTensor`` placeholders (never zeros).
    """
    kind = value.val
    if kind == ValueType.TENSOR:
        if value.tensor is None:
            raise ETDumpError(None, f"{where}: Value says Tensor but carries none", "The ETDump is corrupt.")
        return _tensor(value.tensor, buffer)
    if kind == ValueType.TENSOR_LIST:
        return [_tensor(t, buffer) for t in value.tensor_list or ()]
    if kind == ValueType.INT:
        return value.int_value
    if kind == ValueType.BOOL:
        return value.bool_value
    if kind == ValueType.FLOAT:
        return value.float_value
    if kind == ValueType.DOUBLE:
        return value.double_value
    if kind == ValueType.STRING:
        return value.string_value
    return None


def _tensor(t: Tensor, buffer: DebugBuffer | None) -> Any:
    if buffer is None:
        name = DTYPES.get(ScalarType(t.scalar_type), (f"scalar_type_{t.scalar_type}", 0))[0]
        return MissingTensor(name, tuple(t.sizes))
    return buffer.tensor(t)


def require_buffer(buffer: DebugBuffer | None, etdump_path: str | None) -> DebugBuffer:
    """``buffer``, or a ``MissingDataError`` saying how to provide one."""
    if buffer is None:
        raise MissingDataError(
            f"ETDump {etdump_path!r} logs tensors, but no debug buffer was given\n"
            "Pass debug_buffer_path= (CLI: --debug-buffer) with the buffer the runtime wrote in the same run."
        )
    return buffer
