"""Limits numdiff enforces on untrusted input, and how to raise them for genuinely huge models.

Every file numdiff reads may come from anyone, so every size, count and depth taken from a file is
checked against one of these limits before it is used to allocate memory, loop or recurse. The
defaults let every real model through (weights are stored nearly uncompressed; JSON compresses
about 10-20x) while stopping zip bombs, absurd counts and recursion attacks.

Three ways to change a limit, later ones winning:

1. the defaults below;
2. environment variables ``NUMDIFF_<FIELD NAME IN CAPITALS>`` (for example
   ``NUMDIFF_MAX_ENTRY_BYTES=8589934592``), read each time :func:`current_limits` is called;
3. :func:`use_limits` inside a ``with`` block (per thread and per asyncio task).

An ETRecord is checked with the limits in force when :func:`~numdiff.schema.etrecord.parse_etrecord`
reads it, including the parts checked later, on first use (programs, pickled entries): wrap the
call that reads the file.

Example:
    >>> from numdiff.limits import current_limits, use_limits
    >>> with use_limits(max_nesting_depth=500):
    ...     current_limits().max_nesting_depth
    500
"""

from __future__ import annotations

import contextvars
import dataclasses
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from numdiff.errors import UsageError

__all__ = ["ENV_PREFIX", "Limits", "current_limits", "env_var", "raise_hint", "use_limits"]

ENV_PREFIX = "NUMDIFF_"
_GIB = 1 << 30
_MIB = 1 << 20


@dataclass(frozen=True, slots=True)
class Limits:
    """Caps on what an input file may make numdiff allocate, loop over or recurse into.

    Attributes:
        max_entry_bytes: Largest inflated size of one ETRecord zip entry, in bytes. Defaults to
            4 GiB (a model with more weights than that in one program needs it raised).
        max_entry_ratio: The ETRecord's entries together may inflate to at most this many times
            the archive's own size. Defaults to 200: ExecuTorch stores entries uncompressed (ratio
            about 1), a re-zipped record with deflate compresses JSON about 10-20x, and a zip bomb
            inflates about 1000x.
        max_entries: Most entries an ETRecord zip may list. Defaults to 100,000 (a record has
            about 15 per method).
        max_nesting_depth: Deepest nesting of JSON arrays/objects in an ETRecord entry, and of
            containers in a pickled entry. Defaults to 200 (real programs nest under 20 deep).
        max_graph_nodes: Most nodes in one serialized graph. Defaults to 2,000,000.
        max_outputs_per_instruction: Largest output count ``instruction_id_to_num_outs_map`` may
            give one instruction. Defaults to 65,536.
        max_tensor_ratio: A tensor unpickled from an entry may describe at most this many times
            the entry's bytes (a stride-0 view of a few bytes can claim terabytes). Defaults to 64.
        max_tensor_bytes_floor: A tensor may always describe up to this many bytes, however small
            its entry. Defaults to 64 MiB.
        max_program_json_bytes: Largest serialized program (JSON) in an ETRecord or ``.pt2``
            archive. Defaults to 128 MiB (a large LLM's Edge program is tens of MB; parsing JSON
            costs about a second per 100 MB).
        max_compared_runs: Runs of one event block whose logged values are read when the
            ETDump is loaded and compared with run 0's (the note on runs that differ). Later runs'
            values are read, bounds-checked, when something uses them. Defaults to 64 (reading
            every value of a dump with thousands of runs would take seconds per megabyte).
        max_compared_values: Most logged values read and compared at load in one event block,
            over all its compared runs (at least two runs are always compared). Defaults to 4,096
            (a few tenths of a second); a block logging more values per run compares fewer runs.
    """

    max_entry_bytes: int = 4 * _GIB
    max_entry_ratio: float = 200.0
    max_entries: int = 100_000
    max_nesting_depth: int = 200
    max_graph_nodes: int = 2_000_000
    max_outputs_per_instruction: int = 65_536
    max_tensor_ratio: float = 64.0
    max_tensor_bytes_floor: int = 64 * _MIB
    max_compared_runs: int = 64
    max_compared_values: int = 4096
    max_program_json_bytes: int = 128 * _MIB

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise UsageError(f"limit {field.name} must be a positive number, got {value!r}")

    def tensor_bytes_allowed(self, entry_bytes: int) -> int:
        """Most bytes a tensor unpickled from an entry of ``entry_bytes`` bytes may describe."""
        return max(int(self.max_tensor_ratio * entry_bytes), self.max_tensor_bytes_floor)


_FIELDS = {f.name: f for f in dataclasses.fields(Limits)}
_OVERRIDES: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar("numdiff_limits", default={})


def env_var(field: str) -> str:
    """The environment variable that sets ``field`` (``max_entry_bytes`` → ``NUMDIFF_MAX_ENTRY_BYTES``)."""
    return ENV_PREFIX + field.upper()


def _from_env() -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name, field in _FIELDS.items():
        raw = os.environ.get(env_var(name))
        if raw is None or not raw.strip():
            continue
        try:
            values[name] = int(raw) if field.type in (int, "int") else float(raw)
        except ValueError as e:
            raise UsageError(
                f"environment variable {env_var(name)}={raw!r} is not a number\n"
                f"Set it to a positive {'integer' if field.type in (int, 'int') else 'number'} or unset it "
                f"(default {field.default})."
            ) from e
    return values


def current_limits() -> Limits:
    """The limits in force now: defaults, then ``NUMDIFF_*`` environment variables, then :func:`use_limits`.

    Raises:
        UsageError: An environment variable or override is not a positive number.
    """
    overrides = _OVERRIDES.get()
    key = (tuple(os.environ.get(v) for v in _ENV_NAMES), tuple(sorted(overrides.items())))
    cached = _CACHE.get(key)
    if cached is None:  # checked per program node on large graphs: build each distinct setting once
        cached = Limits(**{**_from_env(), **overrides})
        if len(_CACHE) > 64:
            _CACHE.clear()
        _CACHE[key] = cached
    return cached


_ENV_NAMES = tuple(ENV_PREFIX + name.upper() for name in _FIELDS)
_CACHE: dict[tuple[Any, ...], Limits] = {}


@contextmanager
def use_limits(**overrides: int | float) -> Iterator[Limits]:
    """Raise (or lower) limits inside a ``with`` block; yields the limits in force.

    Args:
        **overrides: :class:`Limits` field names and values, e.g. ``max_entry_bytes=16 * 2**30``.

    Raises:
        UsageError: Unknown field name or a value that is not a positive number.

    Example:
        >>> import numdiff
        >>> with numdiff.use_limits(max_entry_bytes=16 * 2**30) as limits:  # a 10 GiB program
        ...     limits.max_entry_bytes
        17179869184
    """
    unknown = sorted(set(overrides) - set(_FIELDS))
    if unknown:
        raise UsageError(f"unknown limit(s) {unknown}\nKnown limits: {sorted(_FIELDS)}")
    token = _OVERRIDES.set({**_OVERRIDES.get(), **overrides})
    try:
        yield current_limits()
    finally:
        _OVERRIDES.reset(token)


def raise_hint(field: str, needed: int | float | None = None) -> str:
    """The sentence telling the user how to raise ``field`` if the file is genuinely that big."""
    value = "<bigger value>" if needed is None else str(needed)
    return (
        f"If the file is genuinely this big and you trust it, raise the limit: set {env_var(field)}={value} "
        f"or use `with numdiff.use_limits({field}={value}): ...` (numdiff.limits)."
    )
