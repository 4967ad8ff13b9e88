"""numdiff: where a deployed PyTorch model's numbers go wrong, and what each op costs.

Reads the ETDump, debug buffer and ETRecord that ExecuTorch writes, without needing ExecuTorch.
``from numdiff import Inspector`` is a drop-in for ``from executorch.devtools import Inspector``.

Example:
    >>> from numdiff import Inspector
    >>> inspector = Inspector(etdump_path="etdump.etdp", etrecord="etrecord.bin",
    ...                       debug_buffer_path="debug_buffer.bin")  # doctest: +SKIP
    >>> inspector.print_data_tabular()  # doctest: +SKIP
    >>> inspector.calculate_numeric_gap("SNR")  # doctest: +SKIP

``import numdiff`` does not import torch: the names that need it (comparators, ETRecord
parsing, capture) load it on first use.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from numdiff.errors import (
    CaptureError,
    ComparatorError,
    ComparatorTypeError,
    ComparatorValueError,
    DebugBufferError,
    DelegateMetadataError,
    ETDumpError,
    ETRecordError,
    InputError,
    InternalError,
    MismatchedArtifactsError,
    MissingDataError,
    MissingDependencyError,
    NumdiffError,
    UnknownNameError,
    UsageError,
    UsageTypeError,
)
from numdiff.inspector import Inspector
from numdiff.limits import Limits, use_limits
from numdiff.profile.events import Event, EventBlock
from numdiff.profile.perf import PerfData
from numdiff.profile.timescale import TimeScale
from numdiff.profile.vgf import parse_vgf_neural_statistics_delegate_metadata, parse_vgf_neural_statistics_metadata

if TYPE_CHECKING:
    from numdiff.comparators import (
        CosineSimilarityComparator,
        L1Comparator,
        MaxAbsComparator,
        MSEComparator,
        NumericalComparatorBase,
        SNRComparator,
        compare_results,
        get_comparator,
        register_comparator,
    )
    from numdiff.culprits import CulpritReport, Thresholds
    from numdiff.gap import GapReport
    from numdiff.schema.etrecord import ETRecord, parse_etrecord

__version__ = "0.1.0"

#: Names loaded on first use (they import torch).
_LAZY = {
    "CosineSimilarityComparator": "numdiff.comparators",
    "L1Comparator": "numdiff.comparators",
    "MSEComparator": "numdiff.comparators",
    "MaxAbsComparator": "numdiff.comparators",
    "NumericalComparatorBase": "numdiff.comparators",
    "SNRComparator": "numdiff.comparators",
    "compare_results": "numdiff.comparators",
    "get_comparator": "numdiff.comparators",
    "register_comparator": "numdiff.comparators",
    "GapReport": "numdiff.gap",
    "CulpritReport": "numdiff.culprits",
    "Thresholds": "numdiff.culprits",
    "ETRecord": "numdiff.schema.etrecord",
    "parse_etrecord": "numdiff.schema.etrecord",
}

__all__ = [
    "CaptureError",
    "ComparatorError",
    "ComparatorTypeError",
    "ComparatorValueError",
    "CosineSimilarityComparator",
    "CulpritReport",
    "DebugBufferError",
    "DelegateMetadataError",
    "ETDumpError",
    "ETRecord",
    "ETRecordError",
    "Event",
    "EventBlock",
    "GapReport",
    "InputError",
    "Inspector",
    "InternalError",
    "L1Comparator",
    "Limits",
    "MSEComparator",
    "MaxAbsComparator",
    "MismatchedArtifactsError",
    "MissingDataError",
    "MissingDependencyError",
    "NumdiffError",
    "NumericalComparatorBase",
    "PerfData",
    "SNRComparator",
    "Thresholds",
    "TimeScale",
    "UnknownNameError",
    "UsageError",
    "UsageTypeError",
    "compare_results",
    "get_comparator",
    "parse_etrecord",
    "parse_vgf_neural_statistics_delegate_metadata",
    "parse_vgf_neural_statistics_metadata",
    "register_comparator",
    "use_limits",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'numdiff' has no attribute {name!r}")
