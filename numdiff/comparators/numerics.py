"""Tensor conversions shared by every metric: explicit upcasts and the reference's NaN quirk.

Two conversions, deliberately separate:

* :func:`upcast_float64` only changes the dtype (every value, NaN and inf included, is kept).
  numdiff's own metrics use it.
* :func:`reference_float64` is the reference's float conversion, reproduced for drop-in numbers:
  when a tensor holds a NaN, the reference replaces every NaN with 0 *and* every ±inf with the
  largest finite float64. This hides the very faults a numerical debugger hunts, so each
  replacement is counted and reported (a warning, or a tally inside :func:`collect_replacements`).
"""

from __future__ import annotations

import importlib
import math

import warnings
from collections.abc import Callable, Hashable, Iterator, Sequence
from concurrent.futures import Executor, Future
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
import torch

from numdiff.errors import UsageError

__all__ = [
    "PresummedPairs",
    "ReplacementTally",
    "collect_replacements",
    "difference_sums_l1",
    "finite_difference_sums",
    "presummed",
    "reference_float64",
    "same_shape",
    "sums_kernel",
    "upcast_float64",
]


@dataclass(slots=True)
class ReplacementTally:
    """Running count of values :func:`reference_float64` replaced (a counter, hence mutable)."""

    nan: int = 0
    """NaN values replaced by 0."""
    inf: int = 0
    """±inf values replaced by ±1.797e308 (only in tensors that also held a NaN)."""

    def __bool__(self) -> bool:
        return bool(self.nan or self.inf)

    def describe(self) -> str:
        """Human summary, e.g. ``"2 NaN replaced by 0"``."""
        parts = []
        if self.nan:
            parts.append(f"{self.nan} NaN replaced by 0")
        if self.inf:
            parts.append(f"{self.inf} inf replaced by the largest finite float64")
        return ", ".join(parts)


_ACTIVE_TALLY: ContextVar[ReplacementTally | None] = ContextVar("numdiff_replacement_tally", default=None)


@contextmanager
def collect_replacements() -> Iterator[ReplacementTally]:
    """Count :func:`reference_float64` replacements in this block instead of warning per call.

    Example:
        >>> with collect_replacements() as tally:
        ...     _ = reference_float64(torch.tensor([float("nan"), 1.0]))
        >>> tally.nan
        1
    """
    tally = ReplacementTally()
    token = _ACTIVE_TALLY.set(tally)
    try:
        yield tally
    finally:
        _ACTIVE_TALLY.reset(token)


def upcast_float64(value: object) -> torch.Tensor:
    """A detached float64 CPU tensor holding the same values (scalars become 0-d tensors).

    Raises:
        UsageError: ``value`` is a list/tuple or cannot be turned into a tensor.

    Example:
        >>> upcast_float64(torch.tensor([1, 2], dtype=torch.int8))
        tensor([1., 2.], dtype=torch.float64)
    """
    if isinstance(value, Sequence):
        raise UsageError(
            f"cannot convert a {type(value).__name__} of {len(value)} values to one tensor\n"
            "Compare sequences element by element."
        )
    try:
        tensor = torch.as_tensor(value, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError) as e:
        raise UsageError(
            f"cannot convert a value of type {type(value).__name__} to a tensor: {e}\n"
            "Metrics accept tensors and Python numbers."
        ) from e
    return tensor.detach().cpu()


def reference_float64(value: object) -> torch.Tensor:
    """The reference's float conversion, NaN quirk included; every replacement is reported.

    Converts like :func:`upcast_float64`; then, only if the tensor holds a NaN, applies
    ``torch.nan_to_num``: NaN → 0, +inf → +1.797e308, -inf → -1.797e308. Inside
    :func:`collect_replacements` the counts go to the tally; otherwise each call that replaced
    something warns.

    Example:
        >>> with collect_replacements():
        ...     reference_float64(torch.tensor([float("nan"), 2.0]))
        tensor([0., 2.], dtype=torch.float64)
    """
    tensor = upcast_float64(value)
    nan_mask = torch.isnan(tensor)
    if not bool(nan_mask.any()):
        return tensor
    found = ReplacementTally(nan=int(nan_mask.sum()), inf=int(torch.isinf(tensor).sum()))
    tally = _ACTIVE_TALLY.get()
    if tally is None:
        warnings.warn(
            f"numdiff: reference float conversion: {found.describe()} (reference behaviour).\n"
            "numdiff's cosine and max_abs metrics keep NaN; use them to see it.",
            UserWarning,
            stacklevel=2,
        )
    else:
        tally.nan += found.nan
        tally.inf += found.inf
    return torch.nan_to_num(tensor)


def same_shape(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(a, b)`` with ``b`` viewed in ``a``'s shape when only the shapes differ.

    Numbers are compared element by element in row-major order, never broadcast.

    Raises:
        UsageError: The two hold different numbers of elements.

    Example:
        >>> a, b = same_shape(torch.zeros(2, 3), torch.ones(6))
        >>> tuple(b.shape)
        (2, 3)
    """
    if a.shape == b.shape:
        return a, b
    if a.numel() != b.numel():
        raise UsageError(
            f"shapes {tuple(a.shape)} and {tuple(b.shape)} hold different numbers of elements "
            f"({a.numel()} vs {b.numel()})\nElement-wise metrics need the same elements on both sides."
        )
    return a, b.reshape(a.shape)


def _flat_numpy(value: object) -> np.ndarray[Any, Any] | None:
    """A zero-copy 1-D numpy view of a CPU tensor numpy can read (None for bf16, fp8, scalars...)."""
    if not isinstance(value, torch.Tensor) or value.device.type != "cpu" or value.dim() == 0:
        return None
    if value.dtype not in _NUMPY_DTYPES or value.requires_grad:
        return None
    return value.detach().numpy().reshape(-1)


_NUMPY_DTYPES = frozenset({
    torch.float16, torch.float32, torch.float64, torch.int8, torch.uint8, torch.int16,
    torch.int32, torch.int64, torch.bool,
})


_CHUNK = 1 << 16  # elements per block: the float64 temporaries (0.5 MiB each) stay in cache

_native: ModuleType | None
try:  # built by `pip install` where a C compiler is found (setup.py); else numpy computes the same sums
    _native = importlib.import_module("numdiff.comparators._sums")
except ImportError:  # pragma: no cover - depends on the build
    _native = None
_NATIVE_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))

_SumsResult = tuple[float, float, float, int] | None


def finite_difference_sums(a: object, b: object, *, need_l1: bool = True) -> _SumsResult:
    """``(sum(a²), sum((a-b)²), sum(|a-b|), n)`` in float64, or None when the fast path cannot apply.

    The reference metrics convert both sides to float64 tensors and reduce with several passes
    each. For CPU tensors of the same element count the same float64 sums are computed without a
    float64 copy of either input: every element is converted to float64 (exactly), subtracted in
    float64 and reduced, so the results equal the reference's up to summation order (~1e-15
    relative on ordinary data, ~1e-14 at worst on adversarial data, as numpy's own sums). It applies only when every sum is finite: with a NaN or inf anywhere, callers take
    the reference path, whose NaN quirk must then be reproduced and reported. ``sum(|a-b|)`` is
    0.0 unless ``need_l1``.

    float32/float64 pairs are summed in one pass by the compiled ``numdiff.comparators._sums``
    (``_sums.c``: blocks of 1024 elements in vector lanes, block sums added with compensation;
    2.5x faster than numpy on 160 pairs shaped like the benchmark's: benchmarks/metric_sums.py).
    Other dtypes, strided views, views not aligned to their element size (a debug buffer's tensor at an odd offset), or an install where
    that module could not be built (:func:`sums_kernel` says), go through numpy block by block:
    casts, a float64 subtraction and einsum reductions, never ``np.dot``, which calls the threaded
    BLAS whose threads spin-wait for a core on a busy machine (the benchmark gap took 5.4 s at the
    default thread count against 0.85 s with one thread). Neither path runs a torch kernel or
    starts a thread pool, and the compiled one releases the GIL, so the sums may run on a worker
    thread while the graph runs (:class:`PresummedPairs`).

    Inside :func:`presummed`, a pair whose sums were computed ahead (same two tensor objects,
    unchanged since) is answered from there.
    """
    memo = _ACTIVE_PRESUMS.get()
    if memo is not None:
        found = memo.lookup(a, b, need_l1)
        if found is not _MISSING:
            return found  # type: ignore[return-value]
    return _difference_sums(a, b, need_l1)


def _difference_sums(a: object, b: object, need_l1: bool) -> _SumsResult:
    x, y = _flat_numpy(a), _flat_numpy(b)
    if x is None or y is None or x.size != y.size or x.size == 0:
        return None
    if (_native is not None and x.dtype in _NATIVE_DTYPES and y.dtype in _NATIVE_DTYPES
            and x.flags.c_contiguous and y.flags.c_contiguous and x.flags.aligned and y.flags.aligned):
        signal, noise, l1, _ = _native.sums(x, y, need_l1)
    else:
        signal, noise, l1 = _numpy_difference_sums(x, y, need_l1)
    if not (math.isfinite(signal) and math.isfinite(noise) and math.isfinite(l1)):
        return None
    return signal, noise, l1, int(x.size)


def _numpy_difference_sums(x: np.ndarray[Any, Any], y: np.ndarray[Any, Any], need_l1: bool) -> tuple[float, float, float]:
    """The sums with numpy, block by block: any dtypes, strided or misaligned views, and where the compiled
    module is not built."""
    signal = noise = l1 = 0.0
    size = min(_CHUNK, x.size)
    wide, diff = np.empty(size, dtype=np.float64), np.empty(size, dtype=np.float64)
    # inf - inf is NaN and large values overflow the squares: the sums then are not finite and the
    # caller takes the reference path, which counts and reports them; numpy need not warn as well.
    with np.errstate(invalid="ignore", over="ignore"):
        for start in range(0, x.size, _CHUNK):
            xs, ys = x[start:start + _CHUNK], y[start:start + _CHUNK]
            d = diff[: xs.size]
            if xs.dtype == np.float64:
                w = xs
            else:
                w = wide[: xs.size]
                np.copyto(w, xs, casting="safe")
            # both sides converted, then one float64-only subtraction: numpy's mixed-dtype subtract
            # casts through a slower buffered loop
            if ys.dtype == np.float64:
                np.subtract(w, ys, out=d)
            else:
                np.copyto(d, ys, casting="safe")
                np.subtract(w, d, out=d)
            signal += float(np.einsum("i,i->", w, w))
            noise += float(np.einsum("i,i->", d, d))
            if need_l1:
                l1 += float(np.abs(d, out=d).sum())
    return signal, noise, l1


def sums_kernel() -> str:
    """Which loop computes the metrics' difference sums of float32/float64 pairs: ``"native (avx)"`` or
    ``"native (portable)"`` (the compiled ``numdiff.comparators._sums``, one pass over each pair) or
    ``"numpy"`` (the module was not built: the same sums, several passes, about 2.5x slower)."""
    return "numpy" if _native is None else f"native ({_native.kernel()})"


class _Missing:
    """Marker: no sums computed ahead for this pair."""


_MISSING = _Missing()


@dataclass(slots=True)
class _Presum:
    a: object
    b: object
    versions: tuple[int | None, int | None]
    need_l1: bool
    result: _SumsResult | Future[_SumsResult]


def _version(value: object) -> int | None:
    """torch's in-place change counter of a tensor (0 for other values); None when torch keeps none
    (tensors made under ``torch.inference_mode``), whose sums are then never answered from here."""
    if not isinstance(value, torch.Tensor):
        return 0
    try:
        return int(value._version)
    except RuntimeError:
        return None


def _data_key(value: object) -> Hashable:
    """What the sums of ``value`` depend on: a CPU tensor's memory, dtype and element order (a
    contiguous tensor and its reshaped views share it), else the object itself."""
    if isinstance(value, torch.Tensor) and value.device.type == "cpu" and value.layout == torch.strided:
        order = None if value.is_contiguous() else (tuple(value.shape), tuple(value.stride()))
        return value.data_ptr(), value.dtype, value.numel(), order
    return id(value)


class PresummedPairs:
    """Sums of AOT/runtime pairs computed before the scoring loop asks for them.

    The gap computes each pair's sums as soon as the reference graph has produced its output
    (on a worker thread when the libraries may use several, so the scoring overlaps the graph
    run; otherwise at once). The scoring loop's :func:`finite_difference_sums` then finds them
    here: a pair is answered only when both sides are the same memory read in the same element
    order as the tensors summed (the same tensors, or views reshaping them), unchanged since
    (torch's version counter), and with ``sum(|a-b|)`` when asked for. Anything else (a
    preprocessed copy, a failed worker) is computed as usual, so an answer never depends on
    this cache. The summed tensors are held until the block ends, so their memory is not reused.
    """

    def __init__(self) -> None:
        self._entries: dict[tuple[Hashable, Hashable], _Presum] = {}
        self._answered: set[Hashable] = set()  # runtime sides whose last lookup was answered here

    def __len__(self) -> int:
        return len(self._entries)

    def compute(self, a: object, b: object, need_l1: bool) -> _SumsResult:
        """Compute the pair's sums now and keep them (also returned)."""
        result = _difference_sums(a, b, need_l1)
        self._entries[(_data_key(a), _data_key(b))] = _Presum(a, b, (_version(a), _version(b)), need_l1, result)
        return result

    def submit(self, a: object, b: object, need_l1: bool, executor: Executor,
               after: Callable[[], None] | None = None) -> None:
        """Compute the pair's sums on ``executor``, then call ``after`` there (e.g. drop pages)."""
        def work() -> _SumsResult:
            try:
                return _difference_sums(a, b, need_l1)
            finally:
                if after is not None:
                    after()

        entry = _Presum(a, b, (_version(a), _version(b)), need_l1, executor.submit(work))
        self._entries[(_data_key(a), _data_key(b))] = entry

    def lookup(self, a: object, b: object, need_l1: bool) -> _SumsResult | _Missing:
        """The kept sums of ``(a, b)`` (see the class docstring), or the ``_MISSING`` marker."""
        key = (_data_key(a), _data_key(b))
        entry = self._entries.get(key)
        self._answered.discard(key[1])
        if (entry is None or (need_l1 and not entry.need_l1) or None in entry.versions
                or not entry.versions == (_version(a), _version(b)) == (_version(entry.a), _version(entry.b))):
            return _MISSING
        if isinstance(entry.result, Future):
            try:
                entry.result = entry.result.result()
            except Exception:  # computed again by the caller, which reports any error itself
                del self._entries[key]
                return _MISSING
        if entry.result is not None:  # None (values not all finite): the caller goes on to read both sides
            self._answered.add(key[1])
        return entry.result

    def answered(self, b: object) -> bool:
        """Whether the last lookup of a pair whose runtime side is ``b`` (or a view reshaping it) was
        answered from here, so the scoring loop did not read ``b``."""
        return _data_key(b) in self._answered


_ACTIVE_PRESUMS: ContextVar[PresummedPairs | None] = ContextVar("numdiff_presummed_pairs", default=None)


@contextmanager
def presummed() -> Iterator[PresummedPairs]:
    """Let :func:`finite_difference_sums` in this block (this thread) answer from the sums computed ahead.

    Example:
        >>> a, b = torch.ones(3), torch.zeros(3)
        >>> with presummed() as sums:
        ...     _ = sums.compute(a, b, need_l1=False)
        ...     finite_difference_sums(a, b, need_l1=False)
        (3.0, 3.0, 0.0, 3)
    """
    pairs = PresummedPairs()
    token = _ACTIVE_PRESUMS.set(pairs)
    try:
        yield pairs
    finally:
        _ACTIVE_PRESUMS.reset(token)
        pairs._entries.clear()
        pairs._answered.clear()


def difference_sums_l1(comparator: object) -> bool | None:
    """Whether ``comparator``'s scores come from :func:`finite_difference_sums` with ``need_l1``
    (True/False), or None when they may not (a metric that does not use them, or a subclass that
    overrides ``element_compare`` or ``preprocessing``).

    A metric that uses the sums says so in its ``difference_sums_need_l1`` class attribute.
    """
    cls = type(comparator)
    owner = next((k for k in cls.__mro__ if "difference_sums_need_l1" in vars(k)), None)
    if owner is None:
        return None
    for hook in ("element_compare", "preprocessing"):
        if getattr(cls, hook, None) is not getattr(owner, hook, None):
            return None
    need = vars(owner)["difference_sums_need_l1"]
    return need if isinstance(need, bool) else None
