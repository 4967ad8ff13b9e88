"""``Inspector``: the drop-in facade over numdiff's stages (read → profile → symbolicate → gap).

``from numdiff import Inspector`` replaces ``from executorch.devtools import Inspector``: same
constructor, attributes, methods, DataFrame columns and answers on the same files, without
ExecuTorch installed. Differences are deliberate and documented on each method.

Example:
    >>> from numdiff import Inspector
    >>> inspector = Inspector(etdump_path="model.etdp", etrecord="model.etrecord",
    ...                       debug_buffer_path="debug.bin")  # doctest: +SKIP
    >>> inspector.print_data_tabular()  # doctest: +SKIP
    >>> inspector.calculate_numeric_gap("SNR")  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from numdiff.inspector._inspector import Inspector
from numdiff.profile.events import Event, EventBlock
from numdiff.profile.perf import PerfData
from numdiff.profile.timescale import TimeScale
from numdiff.profile.vgf import parse_vgf_neural_statistics_delegate_metadata, parse_vgf_neural_statistics_metadata

# The public names of ``executorch.devtools.inspector`` (1.5.1), so that module path can be swapped
# for this one: the records, the time scale, program-output comparison and the VGF parsers.
__all__ = [
    "Event",
    "EventBlock",
    "Inspector",
    "PerfData",
    "TimeScale",
    "compare_results",
    "parse_vgf_neural_statistics_delegate_metadata",
    "parse_vgf_neural_statistics_metadata",
]

#: Names loaded on first use (they import torch), and the reference's submodules by their names there.
_LAZY = {
    "compare_results": ("numdiff.comparators", "compare_results"),
    "numerical_comparator": ("numdiff.comparators", None),
    "vgf_neural_statistics": ("numdiff.profile.vgf", None),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from importlib import import_module

        module_name, attribute = _LAZY[name]
        module = import_module(module_name)
        value = module if attribute is None else getattr(module, attribute)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'numdiff.inspector' has no attribute {name!r}")
