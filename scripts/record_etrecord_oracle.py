"""Record what the reference ``parse_etrecord`` gives, so numdiff's ETRecord tests need no ExecuTorch.

Run with the oracle interpreter (the only one that has ExecuTorch)::

    /root/.cache/numdiff-oracle/bin/python scripts/record_etrecord_oracle.py            # every fixture
    /root/.cache/numdiff-oracle/bin/python scripts/record_etrecord_oracle.py mlp_fp32   # some fixtures
    /root/.cache/numdiff-oracle/bin/python scripts/record_etrecord_oracle.py --etrecord x.bin --out x.json

For each ``tests/fixtures/<name>/etrecord.bin`` it writes ``tests/fixtures/<name>/etrecord_expected.json``
holding, per program (edge dialect per method, ATen ``exported_program``, every ``graph_map`` entry):
node names, ``op``, op type (``target.__name__``), ``debug_handle``, ``stack_trace``,
``nn_module_stack``, ``from_node`` (as ``NodeSource.to_dict()``), plus the handle maps, the pickled
inputs/outputs and the outputs of ``ep.module()(*inputs)``. Never hand-edit the JSON files.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import traceback
from pathlib import Path
from typing import Any

import torch
from torch.utils import _pytree as pytree

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"


def _jsonable(value: Any) -> Any:
    """Turn tensors, tuples and scalars into plain JSON values (tensors keep dtype and shape)."""
    if isinstance(value, torch.Tensor):
        t = value.detach()
        if t.is_quantized:
            t = t.dequantize()
        values = t.to(torch.float64).tolist() if t.dtype.is_floating_point else t.tolist()
        return {"dtype": str(t.dtype), "shape": list(t.shape), "values": _finite(values)}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float):
        return _finite(value)
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return {"repr": repr(value), "type": type(value).__name__}


def _finite(values: Any) -> Any:
    """Spell NaN/inf as strings so the JSON stays standard."""
    if isinstance(values, list):
        return [_finite(v) for v in values]
    if isinstance(values, float) and not math.isfinite(values):
        return str(values)
    return values


def _op_type(node: torch.fx.Node) -> str | None:
    if node.op != "call_function":
        return None
    return getattr(node.target, "__name__", str(node.target))


def _describe_program(ep: Any) -> dict[str, Any]:
    nodes = []
    for node in ep.graph_module.graph.nodes:
        meta = node.meta
        stack = meta.get("nn_module_stack")
        from_node = meta.get("from_node")
        nodes.append(
            {
                "name": node.name,
                "op": node.op,
                "op_type": _op_type(node),
                "target": str(node.target),
                "debug_handle": meta.get("debug_handle"),
                "stack_trace": meta.get("stack_trace"),
                "nn_module_stack": None if stack is None else {k: list(v) for k, v in stack.items()},
                "from_node": None if from_node is None else [s.to_dict() for s in from_node],
                "args": [str(a) for a in node.args],
            }
        )
    return {
        "nodes": nodes,
        "dialect": getattr(ep, "dialect", None),
        "state_dict_keys": sorted(ep.state_dict.keys()),
        "constants_keys": sorted(ep.constants.keys()),
        "input_specs": [str(s) for s in ep.graph_signature.input_specs],
        "output_specs": [str(s) for s in ep.graph_signature.output_specs],
    }


def _run(ep: Any, inputs: Any) -> dict[str, Any]:
    try:
        out = ep.module()(*inputs)
    except Exception as e:  # record the failure instead of the values
        return {"error": f"{type(e).__name__}: {e}"[:500], "traceback": traceback.format_exc()[-1500:]}
    leaves = pytree.tree_leaves(out)
    return {"values": [_jsonable(v) for v in leaves]}


def record(etrecord_path: Path) -> dict[str, Any]:
    """Parse one ETRecord with the reference and describe everything numdiff must reproduce."""
    from executorch.devtools.etrecord import parse_etrecord

    etr = parse_etrecord(str(etrecord_path))
    edge = etr.edge_dialect_program
    edge_is_dict = isinstance(edge, dict)
    edge_programs = edge if edge_is_dict else ({} if edge is None else {"forward": edge})
    rep = etr._representative_inputs
    inputs = rep[0] if rep else None
    if inputs is None and etr.exported_program is not None and etr.exported_program.example_inputs:
        inputs = etr.exported_program.example_inputs[0]

    def args_for(ep: Any) -> Any:
        if inputs is not None:
            return inputs
        return ep.example_inputs[0] if ep.example_inputs else None

    runs: dict[str, Any] = {}
    programs = {f"edge_dialect_program/{m}": ep for m, ep in edge_programs.items()}
    if etr.exported_program is not None:
        programs["exported_program"] = etr.exported_program
    programs.update({f"graph_map/{n}": ep for n, ep in (etr.graph_map or {}).items()})
    for key, ep in programs.items():
        if (args := args_for(ep)) is not None:
            runs[key] = {"inputs": _jsonable(list(args)), **_run(ep, args)}

    return {
        "etrecord": etrecord_path.name,
        "export_graph_id": etr.export_graph_id,
        "debug_handle_map": etr._debug_handle_map,
        "delegate_map": etr._delegate_map,
        "instruction_id_to_num_outs_map": etr._instruction_id_to_num_outs_map,
        "representative_inputs": _jsonable(rep),
        "reference_outputs": _jsonable(etr._reference_outputs),
        "edge_is_dict": edge_is_dict,
        "edge_dialect_program": {m: _describe_program(ep) for m, ep in edge_programs.items()},
        "exported_program": None if etr.exported_program is None else _describe_program(etr.exported_program),
        "graph_map": {name: _describe_program(ep) for name, ep in (etr.graph_map or {}).items()},
        "runs": runs,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("fixtures", nargs="*", help="fixture folder names under tests/fixtures (default: all)")
    parser.add_argument("--etrecord", type=Path, help="record one ETRecord file instead of fixtures")
    parser.add_argument("--out", type=Path, help="where to write the JSON (with --etrecord)")
    args = parser.parse_args(argv)

    if args.etrecord is not None:
        jobs = [(args.etrecord, args.out or args.etrecord.with_suffix(".expected.json"))]
    else:
        names = args.fixtures or sorted(p.parent.name for p in FIXTURES.glob("*/etrecord.bin"))
        jobs = [(FIXTURES / n / "etrecord.bin", FIXTURES / n / "etrecord_expected.json") for n in names]
    for src, dst in jobs:
        data = record(src)
        dst.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        print(f"wrote {dst}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
