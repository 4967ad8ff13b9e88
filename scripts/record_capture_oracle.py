"""Record what ExecuTorch 1.5.1's devtools answer for reference-graph capture on each fixture.

Writes ``tests/fixtures/<name>/capture_expected.json`` for every fixture folder holding an
``etrecord.bin``. Needs the oracle virtualenv (ExecuTorch installed); numdiff never runs this:

    $(/work/shared/oracle-venv.sh) scripts/record_capture_oracle.py            # all fixtures
    $(/work/shared/oracle-venv.sh) scripts/record_capture_oracle.py mlp_fp32   # some

For each fixture the file holds:

* ``resolved_default``: the graph the reference's ``_resolve_reference_graph(None)`` picks;
* ``propagation``: ``propagate_back_debug_handle`` result with and without validation, and the
  ``debug_handle`` meta of every ATen node afterwards (``{node name: handle}``, ``null`` if absent);
* ``graphs``: for the ATen graph (after propagation) and the Edge graph: handles → op names,
  handles → stack-trace node names (and whether each trace is present), and for each captured
  handle the output's summary (shape, dtype, float64 sum, abs-sum and first values).

Keys are debug handles written as comma-joined ints (``"1"``, ``"3,4"``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
from executorch.devtools.etrecord import parse_etrecord
from executorch.devtools.inspector import Inspector
from executorch.devtools.inspector._inspector_utils import (
    get_aot_debug_handle_to_op_name_mapping,
    propagate_back_debug_handle,
)
from executorch.devtools.inspector._intermediate_output_capturer import IntermediateOutputCapturer

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"
N_VALUES = 8


def key(handle: tuple[int, ...]) -> str:
    return ",".join(str(h) for h in handle)


def summarize(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        flat = value.detach().reshape(-1)
        as64 = flat.to(torch.float64) if not flat.is_complex() else flat.abs().to(torch.float64)
        return {
            "kind": "tensor",
            "shape": list(value.shape),
            "dtype": str(value.dtype),
            "sum": float(as64.sum()) if flat.numel() else 0.0,
            "abs_sum": float(as64.abs().sum()) if flat.numel() else 0.0,
            "first": [float(v) for v in as64[:N_VALUES]],
        }
    if isinstance(value, (list, tuple)):
        return {"kind": "sequence", "items": [summarize(v) for v in value]}
    return {"kind": "other", "repr": repr(value)}


def aten_handles(etrecord: Any) -> dict[str, Any]:
    return {n.name: n.meta.get("debug_handle") for n in etrecord.exported_program.graph.nodes}


def graph_record(program: Any, name: str, inputs: Any) -> dict[str, Any]:
    gm = program.module()
    op_names = get_aot_debug_handle_to_op_name_mapping(gm)
    traces = Inspector._get_aot_debug_handle_to_stack_traces(None, gm, name)  # uses no state
    outputs = IntermediateOutputCapturer(gm).run_and_capture(inputs)
    return {
        "op_names": {key(h): names for h, names in op_names.items()},
        "stack_traces": {key(h): {n: t is not None for n, t in d.items()} for h, d in traces.items()},
        "output_handles": [key(h) for h in outputs],
        "outputs": {key(h): summarize(v) for h, v in outputs.items()},
    }


def record(folder: Path) -> dict[str, Any]:
    path = str(folder / "etrecord.bin")
    resolved = Inspector._resolve_reference_graph(SimpleNamespace(_etrecord=parse_etrecord(path)), None, False)[1]
    result: dict[str, Any] = {"resolved_default": resolved, "propagation": {}, "graphs": {}}
    for disable in (False, True):
        etrecord = parse_etrecord(path)
        if etrecord.exported_program is None:
            result["propagation"][f"disable_validation={disable}"] = None
            continue
        ok = propagate_back_debug_handle(
            etrecord.exported_program, etrecord.export_graph_id, etrecord.edge_dialect_program, disable
        )
        again = propagate_back_debug_handle(
            etrecord.exported_program, etrecord.export_graph_id, etrecord.edge_dialect_program, disable
        )
        result["propagation"][f"disable_validation={disable}"] = {
            "succeeded": ok,
            "second_call": again,
            "aten_handles": aten_handles(etrecord),
        }
    etrecord = parse_etrecord(path)
    inputs = etrecord._representative_inputs
    if inputs is None:
        return result
    if etrecord.exported_program is not None and propagate_back_debug_handle(
        etrecord.exported_program, etrecord.export_graph_id, etrecord.edge_dialect_program, False
    ):
        result["graphs"]["exported_program"] = graph_record(etrecord.exported_program, "exported_program", inputs)
    result["graphs"]["edge_dialect_exported_program"] = graph_record(
        etrecord.edge_dialect_program, "edge_dialect_exported_program", inputs
    )
    return result


def main(argv: list[str]) -> int:
    names = argv or sorted(p.name for p in FIXTURES.iterdir() if (p / "etrecord.bin").exists())
    for name in names:
        folder = FIXTURES / name
        out = record(folder)
        (folder / "capture_expected.json").write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
        graphs = {g: len(r["op_names"]) for g, r in out["graphs"].items()}
        print(f"{name}: default={out['resolved_default']} handles={graphs}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
