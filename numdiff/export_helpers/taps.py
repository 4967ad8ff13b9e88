"""Write the tap sidecar at export time (numdiff itself never imports this module).

ExecuTorch's intermediate-output taps (``executorch.devtools.intermediate_output_tap``) append
tapped values to the program's outputs and return the tap specs in memory only. Save them next
to the program so ``find_culprits(taps="taps.json")`` can read the tapped values back::

    ep_tapped, specs = tap_intermediate_outputs_(ep, (select_all_call_function(), FULL_TENSOR))
    edge = to_edge_transform_and_lower(ep_tapped, partitioner=[XnnpackPartitioner()])
    strip_taps_(edge)
    write_tap_sidecar(specs, "taps.json", user_outputs=1)

The specs are read by attribute (``node_name``, ``op_target``, ``output_index``,
``reducer_name``, ``fields``, ``module_path``, ``module_class``), so nothing here imports
ExecuTorch. The file format is :class:`numdiff.culprits.taps.TapSidecar` (JSON, versioned).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any

__all__ = ["write_tap_sidecar"]

FORMAT = "numdiff-tap-sidecar"
VERSION = 1


def write_tap_sidecar(specs: Iterable[Any], path: str | os.PathLike[str], *, user_outputs: int,
                      method: str = "forward") -> None:
    """Write ``specs`` (ExecuTorch ``TapSpec`` objects) as the sidecar JSON at ``path``.

    Args:
        specs: The tap specs returned by ``tap_intermediate_outputs_``.
        path: Where to write (a new file, or one to replace).
        user_outputs: How many outputs the method had before tapping.
        method: The tapped method.
    """
    taps = [{
        "node_name": str(s.node_name), "op_target": str(s.op_target), "output_index": int(s.output_index),
        "reducer": str(s.reducer_name), "fields": [str(f) for f in s.fields],
        "module_path": None if s.module_path is None else str(s.module_path),
        "module_class": None if s.module_class is None else str(s.module_class),
    } for s in specs]
    doc = {"format": FORMAT, "version": VERSION, "method": method, "user_outputs": int(user_outputs), "taps": taps}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
