"""Read a plain ``pickle.dumps`` of tensors, containers and scalars without running code from it.

ExecuTorch 1.0.x wrote the ETRecord's ``representative_inputs`` and ``reference_outputs`` with
``pickle.dumps`` instead of ``torch.save``. Such a pickle names three callables: torch's tensor
rebuild function, the storage loader (whose argument is a whole legacy ``torch.save`` of one
storage) and ``collections.OrderedDict`` (the tensor's empty backward hooks). This reader admits
those names only (and ``_codecs.encode``, with which protocol 2 writes bytes), each bound to
numdiff's own stand-in, never to the real function:

* the storage loader parses the legacy ``torch.save`` layout itself (four small pickles, then the
  raw bytes) with the same restricted unpickler, and admits only ``torch.<Type>Storage`` names,
  mapped to a dtype; the element count must match the bytes that follow exactly;
* the rebuild function returns a record of (storage, offset, sizes, strides), not a tensor, so no
  torch object exists while unpickling (a crafted ``BUILD`` has nothing to call ``__setstate__`` on);
* tensors are made from those records afterwards, with sizes, strides and offset checked against
  the storage first.

Every other global (any module, any function, ``builtins`` included) is refused, as
``torch.load(weights_only=True)`` refuses them. Containers come back as they were (lists, tuples,
dicts); scalars and strings are pickle opcodes and need no global. Nesting depth is bounded by
``max_nesting_depth`` and cycles are refused.
"""

from __future__ import annotations

import io
import math
import pickle
import struct
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, NamedTuple

from numdiff.limits import current_limits, raise_hint
from numdiff.program.graph_meta import ProgramLoadError

if TYPE_CHECKING:
    import torch

__all__ = ["load_plain_pickle"]


def _refused(problem: str) -> ProgramLoadError:
    """The refusal: the pickle holds something other than tensors, containers and scalars, or is malformed."""
    return ProgramLoadError(problem)


#: Storage class names of the legacy ``torch.save`` layout → torch dtype attribute name.
_STORAGE_DTYPES = {
    "FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16", "LongStorage": "int64", "IntStorage": "int32", "ShortStorage": "int16",
    "CharStorage": "int8", "ByteStorage": "uint8", "BoolStorage": "bool",
    "ComplexFloatStorage": "complex64", "ComplexDoubleStorage": "complex128", "UntypedStorage": "uint8",
}
_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
_LEGACY_PROTOCOL = 1001


# NamedTuples, not dataclasses: immutable even to pickle's BUILD opcode (no __dict__, no __setstate__).
class _StorageType(NamedTuple):
    dtype: str


class _Storage(NamedTuple):
    dtype: str
    data: bytes


class _TensorRecord(NamedTuple):
    storage: _Storage
    offset: int
    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    requires_grad: bool


class _Hooks(OrderedDict[Any, Any]):
    """``collections.OrderedDict`` as a rebuilt tensor's backward hooks: must stay empty."""

    __slots__ = ()


def _rebuild_tensor(storage: object, offset: object, sizes: object, strides: object,
                    requires_grad: object = False, hooks: object = None, metadata: object = None) -> _TensorRecord:
    if not isinstance(storage, _Storage):
        raise _refused(f"a tensor is rebuilt from a {type(storage).__name__}, not a storage")
    if not (_ints(sizes) and _ints(strides) and type(offset) is int and isinstance(requires_grad, bool)):
        raise _refused(f"a tensor's sizes {sizes!r}, strides {strides!r} or offset {offset!r} are not integers")
    if hooks or metadata:
        raise _refused("a tensor carries backward hooks or metadata, which plain inputs never have")
    assert isinstance(sizes, (tuple, list)) and isinstance(strides, (tuple, list))  # _ints checked it
    return _TensorRecord(storage, offset, tuple(sizes), tuple(strides), requires_grad)


def _ints(value: object) -> bool:
    return isinstance(value, (tuple, list)) and all(type(v) is int for v in value)


class _Unpickler(pickle.Unpickler):
    """``find_class`` maps the few admitted names to numdiff's stand-ins and refuses every other."""

    def __init__(self, stream: io.BytesIO, names: dict[tuple[str, str], object]) -> None:
        super().__init__(stream)
        self._names = names
        self.persistent: list[tuple[Any, ...]] = []

    def find_class(self, module: str, name: str) -> Any:
        found = self._names.get((module, name))
        if found is None:
            raise _refused(f"it names {module}.{name}, which is not a tensor, container or scalar")
        return found

    def persistent_load(self, pid: Any) -> Any:
        if self._names is not _LEGACY_NAMES:
            raise _refused("it refers to data outside itself (a persistent id)")
        if not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage" and isinstance(pid[1], _StorageType)
                and isinstance(pid[2], str) and type(pid[4]) is int and pid[4] >= 0 and (len(pid) == 5 or pid[5] is None)):
            raise _refused(f"a storage reference of an unknown form: {str(pid)[:100]}")
        self.persistent.append(pid)
        return pid


def _latin1(text: object, encoding: object = "latin1") -> bytes:
    """``_codecs.encode``, which pickle protocol 2 uses for bytes: latin-1 of a string only."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise _refused("it encodes something other than bytes with _codecs.encode")
    return text.encode("latin-1")


_OUTER_NAMES: dict[tuple[str, str], object] = {
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("collections", "OrderedDict"): _Hooks,
    ("_codecs", "encode"): _latin1,
}
_LEGACY_NAMES: dict[tuple[str, str], object] = {
    **{(module, name): _StorageType(dtype) for name, dtype in _STORAGE_DTYPES.items()
       for module in ("torch", "torch.storage")},
}


def _load_storage(data: object) -> _Storage:
    """One storage from a legacy ``torch.save`` of it (what ``torch.storage._load_from_bytes`` is given)."""
    if not isinstance(data, bytes):
        raise _refused("a storage is loaded from something other than bytes")
    stream = io.BytesIO(data)

    def one() -> Any:
        unpickler = _Unpickler(stream, _LEGACY_NAMES)
        return unpickler.load(), unpickler.persistent

    (magic, _), (protocol, _), (info, _) = one(), one(), one()
    if magic != _LEGACY_MAGIC or protocol != _LEGACY_PROTOCOL or not isinstance(info, dict):
        raise _refused("a storage is not in torch.save's legacy layout")
    if info.get("little_endian") is not True:
        raise _refused("a storage was written on a big-endian machine")
    root, persistent = one()
    keys, _ = one()
    if len(persistent) != 1 or root is not persistent[0] or keys != [persistent[0][2]]:
        raise _refused("a storage entry holds something other than exactly one storage")
    dtype, numel = persistent[0][1].dtype, persistent[0][4]
    head = stream.read(8)
    if len(head) != 8 or struct.unpack("<q", head)[0] != numel:
        raise _refused("a storage's element count does not match its header")
    itemsize = _itemsize(dtype)
    raw = stream.read()
    if len(raw) != numel * itemsize:
        raise _refused(f"a storage of {numel} elements of {itemsize} bytes holds {len(raw)} bytes")
    return _Storage(dtype, raw)


_OUTER_NAMES[("torch.storage", "_load_from_bytes")] = _load_storage


def _torch_dtype(dtype: str) -> torch.dtype:
    """The torch dtype of a name from :data:`_STORAGE_DTYPES` (a fixed table, never a name from the file)."""
    import torch

    found: torch.dtype = getattr(torch, dtype)
    return found


def _itemsize(dtype: str) -> int:
    return _torch_dtype(dtype).itemsize


def load_plain_pickle(data: bytes) -> Any:
    """Unpickle ``data`` admitting tensors, lists, tuples, dicts, scalars and strings only.

    Raises:
        ProgramLoadError: Anything else is named, or the bytes are not a well-formed pickle of these
            (the problem only: the caller adds the entry and the hint).
    """
    try:
        value = _Unpickler(io.BytesIO(data), _OUTER_NAMES).load()
    except ProgramLoadError:
        raise
    except RecursionError as e:
        raise _refused("it is nested deeper than Python's recursion limit") from e
    except Exception as e:  # UnpicklingError, EOFError, ValueError, TypeError, ... from malformed bytes
        raise _refused(f"it is not a readable pickle ({type(e).__name__}: {str(e)[:200]})") from e
    try:
        return _materialize(value)
    except ProgramLoadError:
        raise
    except (RuntimeError, ValueError, TypeError, OverflowError) as e:  # torch refusing a geometry it was given
        raise _refused(f"a tensor cannot be made from it ({type(e).__name__}: {str(e)[:200]})") from e


def _materialize(value: Any) -> Any:
    """Replace every tensor record by a tensor (geometry checked first); containers rebuilt, cycles refused."""
    limit = current_limits().max_nesting_depth
    on_path: set[int] = set()

    def walk(item: Any, depth: int) -> Any:
        if isinstance(item, _TensorRecord):
            return _tensor(item)
        if isinstance(item, (_Storage, _StorageType)):
            raise _refused("it holds a bare storage outside a tensor")
        if not isinstance(item, (list, tuple, dict)):
            return item
        if id(item) in on_path:
            raise _refused("a container contains itself")
        if depth >= limit:
            raise _refused(f"containers nested more than {limit} deep (max_nesting_depth); "
                                   + raise_hint("max_nesting_depth"))
        on_path.add(id(item))
        try:
            if isinstance(item, dict):
                pairs = [(key, walk(child, depth + 1)) for key, child in item.items()]
                return OrderedDict(pairs) if isinstance(item, _Hooks) else dict(pairs)
            children = [walk(child, depth + 1) for child in item]
            return children if isinstance(item, list) else tuple(children)
        finally:
            on_path.discard(id(item))

    return walk(value, 0)


def _tensor(record: _TensorRecord) -> torch.Tensor:
    import torch

    sizes, strides, offset = record.sizes, record.strides, record.offset
    if len(sizes) != len(strides) or any(s < 0 for s in sizes) or any(s < 0 for s in strides) or offset < 0:
        raise _refused(f"a tensor's sizes {list(sizes)}, strides {list(strides)} or offset {offset} are impossible")
    dtype = _torch_dtype(record.storage.dtype)
    itemsize = _itemsize(record.storage.dtype)
    elements = len(record.storage.data) // itemsize
    if math.prod(sizes) and offset + sum((n - 1) * s for n, s in zip(sizes, strides)) >= elements:
        raise _refused(f"a tensor of sizes {list(sizes)}, strides {list(strides)} and offset {offset} "
                               f"reaches past its storage of {elements} elements")
    flat = torch.frombuffer(bytearray(record.storage.data), dtype=torch.uint8) if record.storage.data else \
        torch.empty(0, dtype=torch.uint8)
    base = flat.view(dtype) if elements else torch.empty(0, dtype=dtype)
    tensor = torch.empty(0, dtype=dtype).set_(base.untyped_storage(), offset, sizes, strides)
    return tensor.requires_grad_(record.requires_grad) if record.requires_grad and dtype.is_floating_point else tensor
