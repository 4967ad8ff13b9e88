"""Unpickle the ETRecord's ``torch.save`` entries safely (tensors and plain containers only).

Loading is ``torch.load(weights_only=True)`` (no code runs); the plain ``pickle.dumps`` entries of
ExecuTorch 1.0.x go through numdiff's own restricted reader (:mod:`numdiff.program._plain_pickle`),
which admits the same tensors, containers and scalars and nothing else. What comes out is then checked before
anyone uses it: containers nested no deeper than ``max_nesting_depth`` and without cycles, and
every tensor's sizes, strides and storage offset consistent with its storage and no larger than
the entry can honestly describe (a stride-0 view of four bytes can claim terabytes, which a later
``clone()`` would allocate). See :mod:`numdiff.limits`.
"""

from __future__ import annotations

import io
import math
import zipfile
from typing import TYPE_CHECKING, Any

from numdiff.limits import current_limits, raise_hint
from numdiff.program.graph_meta import ProgramLoadError

if TYPE_CHECKING:
    import torch

__all__ = ["check_plain_values", "load_torch_artifact"]

_INT64_MAX = 2**63 - 1
_NOT_LOADABLE_HINT = (
    "numdiff loads pickled entries only with torch.load(weights_only=True) and never runs code from them; "
    "ExecuTorch writes these entries with torch.save of tensors, so this one was altered, damaged or written "
    "by another tool. Regenerate the ETRecord with ExecuTorch."
)


def load_torch_artifact(data: bytes, what: str, plain: bool = False) -> Any:
    """Unpickle a ``torch.save`` artifact with ``weights_only=True`` and check what came out.

    Args:
        data: The entry's bytes (empty gives None).
        what: What the bytes are, for messages (``"entry 'representative_inputs'"``).
        plain: Also require plain values only (tensors, lists, tuples, dicts, scalars, strings),
            as the representative inputs and reference outputs are.

    Raises:
        ProgramLoadError: The bytes do not load weights-only, or what they hold breaks a check.
    """
    if len(data) == 0:
        return None
    if plain and data[:1] == b"\x80" and data[1:2] in _PICKLE_PROTOCOLS:
        return _load_plain_pickle(data, what)
    _check_inner_zip(data, what, plain)
    import torch

    try:
        value = torch.load(io.BytesIO(data), weights_only=True)
    except Exception as e:  # UnpicklingError, EOFError, RuntimeError, ValueError, ... from a hostile pickle
        raise ProgramLoadError(
            f"{what} cannot be loaded with torch.load(weights_only=True): {type(e).__name__}: {str(e)[:300]}",
            _NOT_LOADABLE_HINT,
        ) from e
    check_plain_values(value, what, len(data), plain)
    return value


#: The protocol bytes after pickle's PROTO opcode that ``pickle.dumps`` writes (protocols 2 to 5).
_PICKLE_PROTOCOLS = (b"\x02", b"\x03", b"\x04", b"\x05")
_PLAIN_PICKLE_HINT = (
    "ExecuTorch 1.0.x writes this entry with pickle.dumps; numdiff reads such a pickle only when it holds tensors, "
    "lists, tuples, dicts and numbers (as torch.load(weights_only=True) would), and never runs code from it. This one "
    "holds something else, so it was altered or written by another tool: regenerate the ETRecord with ExecuTorch, or "
    "give the inputs directly (ETRecord.update_representative_inputs)."
)


def _load_plain_pickle(data: bytes, what: str) -> Any:
    """A plain ``pickle.dumps`` entry (ExecuTorch 1.0.x), read by the restricted reader and checked."""
    from numdiff.program._plain_pickle import load_plain_pickle

    try:
        value = load_plain_pickle(data)
    except ProgramLoadError as e:
        raise ProgramLoadError(f"{what} is a plain pickle (as ExecuTorch 1.0.x writes it) that numdiff does not "
                               f"read: {e.problem}", e.hint or _PLAIN_PICKLE_HINT) from e
    check_plain_values(value, what, len(data), plain=True)
    return value


def _check_inner_zip(data: bytes, what: str, plain: bool) -> None:
    """A ``torch.save`` artifact is a zip: refuse other formats, and records that would inflate past the limits.

    torch reads each record whole, so a deflated record would be a zip bomb inside the entry.
    """
    if not data.startswith(b"PK\x03\x04"):
        if not plain:  # (a state dict or a .pt2 weight: only ever a torch.save zip)
            raise ProgramLoadError(f"{what} is not a torch.save zip archive (it starts with {data[:8]!r})",
                                   "It is written with torch.save, which writes a zip archive: the file was altered, "
                                   "damaged or written by another tool.")
        raise ProgramLoadError(
            f"{what} is neither a torch.save zip archive nor a pickle (it starts with {data[:8]!r})",
            "ExecuTorch writes these entries with torch.save (a zip archive; releases after 1.0) or pickle.dumps "
            "(1.0.x and older): the file was altered, damaged or written by another tool. Regenerate the ETRecord with ExecuTorch.",
        )
    limits = current_limits()
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as inner:
            declared = sum(info.file_size for info in inner.infolist())
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, UnicodeDecodeError, NotImplementedError) as e:
        raise ProgramLoadError(
            f"{what} is not a readable torch.save archive ({type(e).__name__}: {str(e)[:200]})", _NOT_LOADABLE_HINT
        ) from e
    budget = min(int(limits.max_entry_ratio * len(data)), limits.max_entry_bytes)
    if declared > budget:
        raise ProgramLoadError(
            f"{what}: its records would inflate to {declared} bytes, more than {budget} bytes for a {len(data)}-byte "
            "entry (max_entry_ratio, max_entry_bytes)",
            raise_hint("max_entry_ratio", -(-declared // len(data)) + 1),
        )


def check_plain_values(value: object, what: str, entry_bytes: int, plain: bool = True) -> None:
    """Walk ``value`` (iteratively) and check nesting, cycles, types (when ``plain``) and tensors.

    Raises:
        ProgramLoadError: Nesting too deep, a container that contains itself, a value of a type
            the entry never holds, or a tensor whose geometry is impossible or too large.
    """
    import torch

    limits = current_limits()
    allowed_bytes = limits.tensor_bytes_allowed(entry_bytes)
    on_path: set[int] = set()
    done: set[int] = set()
    stack: list[tuple[Any, int, str, bool]] = [(value, 0, "", False)]
    while stack:
        item, depth, where, leaving = stack.pop()
        if leaving:
            on_path.discard(id(item))
            done.add(id(item))
            continue
        if isinstance(item, torch.Tensor):
            _check_tensor(item, f"{what}{where}", allowed_bytes, entry_bytes, plain)
            continue
        if isinstance(item, (list, tuple, dict)):
            if id(item) in on_path:
                raise ProgramLoadError(f"{what}{where} contains itself", _NOT_LOADABLE_HINT)
            if id(item) in done:
                continue
            if depth >= limits.max_nesting_depth:
                raise ProgramLoadError(
                    f"{what}{where}: containers nested more than {limits.max_nesting_depth} deep (max_nesting_depth)",
                    raise_hint("max_nesting_depth"),
                )
            on_path.add(id(item))
            stack.append((item, depth, where, True))
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            for key, child in pairs:
                if plain and isinstance(item, dict) and not isinstance(key, (str, int)):
                    raise ProgramLoadError(f"{what}{where}: dict key of type {type(key).__name__}", _NOT_LOADABLE_HINT)
                stack.append((child, depth + 1, f"{where}[{key!r}]", False))
            continue
        if plain and not (item is None or isinstance(item, (bool, int, float, complex, str, bytes))):
            raise ProgramLoadError(
                f"{what}{where} holds a {type(item).__module__}.{type(item).__qualname__}; "
                "it holds only tensors, lists, tuples, dicts and numbers",
                _NOT_LOADABLE_HINT,
            )


def _check_tensor(tensor: torch.Tensor, where: str, allowed_bytes: int, entry_bytes: int, plain: bool) -> None:
    """Sizes, strides and offset fit the storage, and the tensor describes no more than allowed.

    Tensors that are not dense CPU tensors are refused in plain entries and left to torch's own
    checks elsewhere (a state dict may legitimately hold them).
    """
    if tensor.layout != _strided() or tensor.is_quantized or tensor.device.type not in ("cpu", "meta"):
        if not plain:
            return
        raise ProgramLoadError(
            f"{where}: a {tensor.layout} tensor on {tensor.device} (quantized: {tensor.is_quantized}); "
            "numdiff reads dense CPU tensors only",
            _NOT_LOADABLE_HINT,
        )
    sizes, strides, offset = list(tensor.shape), list(tensor.stride()), tensor.storage_offset()
    if any(s < 0 for s in sizes) or any(s < 0 for s in strides) or offset < 0:
        raise ProgramLoadError(f"{where}: negative size, stride or offset {sizes} {strides} {offset}", _NOT_LOADABLE_HINT)
    itemsize = tensor.element_size()
    numel = math.prod(sizes)
    logical = numel * itemsize
    if numel and (offset + sum((n - 1) * s for n, s in zip(sizes, strides))) * itemsize > _INT64_MAX:
        raise ProgramLoadError(f"{where}: sizes {sizes} and strides {strides} overflow 64 bits", _NOT_LOADABLE_HINT)
    if logical > allowed_bytes:
        raise ProgramLoadError(
            f"{where}: a tensor of shape {sizes} (strides {strides}) describes {logical} bytes, more than the "
            f"{allowed_bytes} bytes allowed for an entry of {entry_bytes} bytes (max_tensor_ratio, max_tensor_bytes_floor)",
            "A tiny storage viewed with stride 0 can claim a huge size; using it would allocate all of it. "
            + raise_hint("max_tensor_bytes_floor", logical),
        )
    if tensor.device.type == "cpu" and numel:
        needed = (offset + sum((n - 1) * s for n, s in zip(sizes, strides)) + 1) * itemsize
        have = tensor.untyped_storage().nbytes()
        if needed > have:
            raise ProgramLoadError(
                f"{where}: sizes {sizes}, strides {strides} and offset {offset} reach byte {needed} of a "
                f"{have}-byte storage",
                _NOT_LOADABLE_HINT,
            )


def _strided() -> torch.layout:
    import torch

    return torch.strided
