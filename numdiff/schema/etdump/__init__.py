"""The ETDump file: typed records for the whole schema, and a fast, checked reader.

The runtime writes a size-prefixed FlatBuffer with file identifier ``ED00`` (schema:
``numdiff/schema/etdump/etdump.fbs``); the non-prefixed form is accepted too. ``read_etdump`` returns an
``ETDump`` whose runs keep their events in columns (``EventColumns``: one numpy array per field),
which is what the profiling view consumes; ``RunData.events`` materialises the typed records
(``Event`` with exactly one of ``ProfileEvent`` / ``AllocationEvent`` / ``DebugEvent``) on demand.

Example:
    >>> from numdiff.schema.etdump import read_etdump
    >>> dump = read_etdump("model.etdp")  # doctest: +SKIP
    >>> [run.name for run in dump.run_data]  # doctest: +SKIP
    ['Method::init', 'Execute']
"""

from __future__ import annotations

from numdiff.schema.etdump._reader import read_etdump
from numdiff.schema.etdump.dump import ETDump, RunData, read_value
from numdiff.schema.etdump.records import (
    AllocationEvent,
    Allocator,
    DebugEvent,
    ETDumpDoc,
    Event,
    EventColumns,
    EventKind,
    FILE_IDENTIFIER,
    ProfileEvent,
    RunDoc,
    ScalarType,
    Tensor,
    Value,
    ValueType,
)

__all__ = [
    "AllocationEvent",
    "Allocator",
    "DebugEvent",
    "ETDump",
    "ETDumpDoc",
    "Event",
    "EventColumns",
    "EventKind",
    "FILE_IDENTIFIER",
    "ProfileEvent",
    "RunData",
    "RunDoc",
    "ScalarType",
    "Tensor",
    "Value",
    "ValueType",
    "read_etdump",
    "read_value",
]
