"""The debug buffer: raw bytes of the tensors an ETDump's debug events point at.

The runtime writes the buffer at its full allocated size, mostly zeros after the used part, so it
is memory-mapped, never read whole. The mapping is copy-on-write (``mmap.ACCESS_COPY``): tensors
are zero-copy views that a user may even write to without changing the file, and torch does not
warn about read-only buffers.

Nothing is read on trust: a tensor's scalar type must be known, its sizes and strides must
describe a dense layout (the runtime copies every logged tensor densely), its bytes, computed with
Python integers, must lie inside the buffer, and two logged tensors may not partially share bytes
(``DebugBuffer.check_no_overlap``). Each failure is a ``DebugBufferError`` / ``ETDumpError``
naming the tensor and the event it belongs to.

Example:
    >>> from numdiff.schema.debug_buffer import DebugBuffer
    >>> buf = DebugBuffer("debug_buffer.bin")  # doctest: +SKIP
    >>> buf.tensor(value.tensor)  # doctest: +SKIP
    tensor([[...]])
"""

from __future__ import annotations

import functools
import math
import mmap
import os
import re
import zipfile
from dataclasses import dataclass
from collections.abc import Iterable
from typing import TYPE_CHECKING, TypeAlias, Union

from numdiff.errors import DebugBufferError, ETDumpError, MissingDataError
from numdiff.schema._pages import ResidentPages
from numdiff.schema.etdump import FILE_IDENTIFIER, ScalarType, Tensor, Value, ValueType

if TYPE_CHECKING:
    import torch

__all__ = ["DTYPES", "MAX_DIMS", "DebugBuffer", "Layout", "MissingTensor", "foreign_format", "inflate_value", "tensor_layout",
           "torch_dtype"]

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


_DTYPES_BY_INT = {int(k): v for k, v in DTYPES.items()}

#: Most dimensions a logged tensor may have (ExecuTorch's runtime allows 16; torch allows 64).
MAX_DIMS = 64


def torch_dtype(scalar_type: int) -> tuple[torch.dtype, int]:
    """The torch dtype and element size of an ETDump scalar type."""
    import torch

    name, size = _dtype_entry(scalar_type)
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ETDumpError(None, f"tensor has scalar type {ScalarType(scalar_type).name}, which this torch "
                          f"({torch.__version__}) has no dtype for", "Upgrade torch to read this tensor.")
    return dtype, size


def _dtype_entry(scalar_type: int) -> tuple[str, int]:
    found = _DTYPES_BY_INT.get(scalar_type)
    if found is not None:
        return found
    try:
        return DTYPES[ScalarType(scalar_type)]
    except ValueError as e:
        raise ETDumpError(None, f"tensor has unknown scalar type {scalar_type}",
                          f"Known types: {', '.join(f'{t.value} ({t.name})' for t in ScalarType)}. "
                          "The ETDump is corrupt, or written by a newer runtime than numdiff knows.") from e


@dataclass(frozen=True, slots=True)
class Layout:
    """Where a logged tensor's bytes are: ``nbytes`` dense bytes from ``offset`` (Python ints)."""

    offset: int
    nbytes: int
    itemsize: int
    numel: int
    strides: tuple[int, ...]  # the strides to view the bytes with (contiguous when the dump gave none)


def tensor_layout(t: Tensor, *, path: str | None = None, where: str = "") -> Layout:
    """Check ``t``'s sizes and strides and say which bytes it occupies.

    The runtime copies every logged tensor densely (in its dim order) into the buffer, so a tensor
    occupies exactly ``numel * itemsize`` bytes from its offset, and its strides must be a
    permutation of a dense layout. Everything is computed with Python integers: no overflow.

    Raises:
        DebugBufferError: negative or too many sizes, strides that are not a dense layout, or a
            negative offset for a tensor that has bytes.
        ETDumpError: unknown scalar type.
    """
    _, itemsize = _dtype_entry(t.scalar_type)
    shape = _shape(itemsize, tuple(t.sizes), tuple(t.strides))
    if isinstance(shape, str):
        label = f"{where}: " if where else ""
        raise DebugBufferError(path, f"{label}tensor at offset {t.offset} {shape}", _CORRUPT_HINT)
    numel, nbytes, strides = shape
    if nbytes and t.offset < 0:
        label = f"{where}: " if where else ""
        raise DebugBufferError(path, f"{label}tensor at offset {t.offset} has a negative offset for {nbytes} bytes",
                               _CORRUPT_HINT)
    return Layout(int(t.offset), nbytes, itemsize, numel, strides)


_CORRUPT_HINT = "The ETDump is corrupt: the runtime logs dense tensors of sizes >= 0 that fit in the debug buffer."


@functools.lru_cache(maxsize=4096)
def _shape(itemsize: int, sizes: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, int, tuple[int, ...]] | str:
    """(numel, nbytes, strides to view with) of a shape, or what is wrong with it (cached: dumps
    repeat the same few shapes thousands of times)."""
    if len(sizes) > MAX_DIMS:
        return f"has {len(sizes)} dimensions (at most {MAX_DIMS} are supported)"
    if any(n < 0 for n in sizes):
        return f"has negative sizes {list(sizes)}"
    if any(s < 0 for s in strides):
        return f"has negative strides {list(strides)}"
    numel = math.prod(sizes)
    if math.prod(max(n, 1) for n in sizes) * itemsize >= 2**63:
        return f"has sizes {list(sizes)} whose byte count overflows 64 bits"
    contiguous = tuple(_contiguous_strides(list(sizes)))
    if not strides:
        strides = contiguous
    elif len(strides) != len(sizes):
        return f"has {len(strides)} strides {list(strides)} for {len(sizes)} sizes {list(sizes)}"
    elif strides != contiguous and numel and not _is_dense(sizes, strides):
        return (f"has strides {list(strides)} that do not lay out sizes {list(sizes)} densely "
                "(negative, overlapping or gapped)")
    return numel, numel * itemsize, strides


def _is_dense(sizes: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Whether the strides are some permutation of a dense (gap-free, non-overlapping) layout."""
    dims = sorted((s, n) for n, s in zip(sizes, strides, strict=True) if n != 1)
    expected = 1
    for stride, n in dims:
        if stride != expected:
            return False
        expected *= n
    return True


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


class DebugBuffer(ResidentPages):
    """A memory-mapped debug buffer.

    Args:
        path: The debug buffer file the runtime wrote next to the ETDump.

    Raises:
        DebugBufferError: The file cannot be opened, or it is another kind of file (a zip such as an
            ETRecord, an ETDump, a ``.pte`` program: see :func:`foreign_format`).
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

        found = foreign_format(self._map[:16], self.size, self.path)
        if found is not None:
            if isinstance(self._map, mmap.mmap):
                self._map.close()
            raise DebugBufferError(self.path, f"is not a debug buffer: it is {found}", _foreign_hint(found))
        self._init_pages(_address_of(self._map) if self.size else 0)

    def __repr__(self) -> str:
        return f"DebugBuffer({self.path!r}, {self.size} bytes)"

    def view(self, offset: int, nbytes: int) -> memoryview:
        """Raw bytes ``[offset, offset + nbytes)``, checked against the buffer's size."""
        self._check(offset, nbytes, "bytes")
        return memoryview(self._map)[offset : offset + nbytes]

    def _check(self, offset: int, nbytes: int, what: str) -> None:
        if offset < 0 or nbytes < 0 or offset + nbytes > self.size:
            raise DebugBufferError(
                self.path,
                f"{what} at offset {offset} needs {nbytes} bytes, past the end of the {self.size}-byte buffer",
                "The debug buffer does not belong to this ETDump, or was cut short: pass the buffer "
                "written in the same run, and make the runtime's debug buffer large enough.",
            )

    def tensor(self, t: Tensor, where: str = "") -> torch.Tensor:
        """The tensor ``t`` describes, as a zero-copy view honouring its sizes and strides.

        Raises:
            DebugBufferError: the tensor's bytes lie outside the buffer, or its layout is invalid.
            ETDumpError: unknown scalar type.
        """
        import torch

        dtype, _ = torch_dtype(t.scalar_type)
        lay = self.layout(t, where)
        sizes = list(t.sizes)
        if lay.numel == 0:
            return torch.empty(sizes, dtype=dtype)
        flat = torch.frombuffer(self._map, dtype=dtype, count=lay.numel, offset=lay.offset)
        if list(lay.strides) == _contiguous_strides(sizes):
            return flat.view(sizes)
        return flat.as_strided(sizes, list(lay.strides))

    def layout(self, t: Tensor, where: str = "") -> Layout:
        """``t``'s checked layout, its bytes checked to lie inside this buffer."""
        lay = tensor_layout(t, path=self.path, where=where)
        if lay.nbytes:
            what = f"{where + ': ' if where else ''}{ScalarType(t.scalar_type).name} tensor of shape {tuple(t.sizes)}"
            self._check(lay.offset, lay.nbytes, what)
        return lay

    def check_no_overlap(self, tensors: Iterable[tuple[Tensor, str]]) -> None:
        """Check that no two logged tensors partially share bytes.

        The runtime copies each tensor it logs to a fresh, aligned place in the buffer, so two
        tensors' byte ranges are either disjoint or (the same bytes described twice) identical
        with the same type. Anything else means the ETDump does not describe this buffer.

        Raises:
            DebugBufferError: two tensors overlap, naming both (or a tensor is invalid on its own).
        """
        spans: list[tuple[int, int, int, str]] = []
        for t, where in tensors:
            lay = self.layout(t, where)
            if lay.nbytes:
                spans.append((lay.offset, lay.offset + lay.nbytes, t.scalar_type, where))
        spans.sort(key=lambda x: (x[0], x[1]))
        widest: tuple[int, int, int, str] | None = None
        for span in spans:
            if widest is not None and span[0] < widest[1] and span[:3] != widest[:3]:
                raise DebugBufferError(
                    self.path,
                    f"two logged tensors overlap: {_describe(widest)} and {_describe(span)}",
                    "The runtime gives every logged tensor its own bytes, so the ETDump does not describe "
                    "this buffer (or one of them is corrupt): pass the debug buffer written in the same "
                    "run as the ETDump.",
                )
            if widest is None or span[1] > widest[1]:
                widest = span

    def tensors_equal(self, a: Tensor, b: Tensor) -> bool:
        """Whether two logged tensors have the same type, shape and bytes (no tensor is built)."""
        if (a.scalar_type, a.sizes, a.strides) != (b.scalar_type, b.sizes, b.strides):
            return False
        la, lb = self.layout(a), self.layout(b)
        return la.nbytes == 0 or self.view(la.offset, la.nbytes) == self.view(lb.offset, lb.nbytes)


#: A ``.pte`` program's FlatBuffer file identifier: ``ET`` and a two-digit schema version (``ET12``).
_PTE_IDENTIFIER = re.compile(rb"ET[0-9]{2}\Z")
_ZIP_LOCAL_HEADER = b"PK\x03\x04"


def foreign_format(head: bytes, size: int, path: str | None = None) -> str | None:
    """What another kind of file passed as a debug buffer is, from its first 16 bytes, or None.

    A debug buffer has no header (it is raw tensor bytes), so only formats with a magic of their
    own are recognised, each with a second sign so that tensor bytes cannot pass for one: a zip
    (local header ``PK\\x03\\x04`` and an end-of-central-directory record, which ``zipfile``
    finds; an ETRecord or a ``.pt2`` archive), an ETDump (FlatBuffer identifier ``ED00``, plain or
    size-prefixed, whose root offset lies inside the file) and a ``.pte`` program (identifier
    ``ET`` + two digits, root offset inside the file).

    Args:
        head: The file's first bytes (at least 12 for the FlatBuffer checks).
        size: The file's size in bytes.
        path: The file, for the zip check (reads its end); None skips it.
    """
    head = bytes(head[:16])

    def root_inside(at: int) -> bool:
        return len(head) >= at + 4 and 8 <= int.from_bytes(head[at:at + 4], "little") < size

    if head.startswith(_ZIP_LOCAL_HEADER) and path is not None and zipfile.is_zipfile(path):
        return "a zip archive (an ETRecord or a .pt2 archive)"
    if (head[4:8] == FILE_IDENTIFIER and root_inside(0)) or (head[8:12] == FILE_IDENTIFIER and root_inside(4)):
        return f"an ETDump (FlatBuffer identifier {FILE_IDENTIFIER.decode()})"
    if _PTE_IDENTIFIER.match(head[4:8]) and root_inside(0):
        return f"an ExecuTorch program (.pte, FlatBuffer identifier {head[4:8].decode()})"
    return None


def _foreign_hint(found: str) -> str:
    """Which file to pass where, for :func:`foreign_format`'s answer."""
    if found.startswith("a zip"):
        other = "The ETRecord goes to --etrecord (Inspector(etrecord=...))"
    elif found.startswith("an ETDump"):
        other = "The ETDump goes to --etdump (Inspector(etdump_path=...))"
    else:
        other = "The .pte program is not an input of numdiff"
    return (f"{other}; as the debug buffer pass the file the runtime wrote with the ETDump "
            "(program.write_etdump_result_to_file(etdump_path, debug_buffer_path), or the buffer given to "
            "ETDumpGen::set_debug_buffer).")


def _describe(span: tuple[int, int, int, str]) -> str:
    start, end, scalar_type, where = span
    name = ScalarType(scalar_type).name
    return f"{where + ' ' if where else ''}({name}, bytes {start}..{end})"


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


def inflate_value(value: Value, buffer: DebugBuffer | None, *, where: str = "") -> LoggedValue:
    """A logged value as Python data: tensor, list of tensors, int, bool, float, str or None.

    Without a debug buffer, tensors come back as ``MissingTensor`` placeholders (never zeros).
    """
    kind = value.val
    if kind == ValueType.TENSOR:
        if value.tensor is None:
            raise ETDumpError(None, f"{where}: Value says Tensor but carries none", "The ETDump is corrupt.")
        return _tensor(value.tensor, buffer, where)
    if kind == ValueType.TENSOR_LIST:
        return [_tensor(t, buffer, f"{where} tensor {i}") for i, t in enumerate(value.tensor_list or ())]
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


def _tensor(t: Tensor, buffer: DebugBuffer | None, where: str) -> LoggedTensor:
    if buffer is None:
        tensor_layout(t, where=where)  # the same checks as with a buffer: no silent garbage
        return MissingTensor(_dtype_entry(t.scalar_type)[0], tuple(t.sizes))
    return buffer.tensor(t, where)


#: A logged tensor: read from the buffer, or a placeholder when no buffer was given.
LoggedTensor: TypeAlias = Union["torch.Tensor", MissingTensor]
#: A logged value as Python data (see :func:`inflate_value`).
LoggedValue: TypeAlias = Union[LoggedTensor, list[LoggedTensor], int, bool, float, str, None]


def require_buffer(buffer: DebugBuffer | None, etdump_path: str | None) -> DebugBuffer:
    """``buffer``, or a ``MissingDataError`` saying how to provide one."""
    if buffer is None:
        raise MissingDataError(
            f"ETDump {etdump_path!r} logs tensors, but no debug buffer was given\n"
            "Pass debug_buffer_path= (CLI: --debug-buffer) with the buffer the runtime wrote in the same run."
        )
    return buffer
