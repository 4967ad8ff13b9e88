"""Write known-truth culprit fixtures (tests/fixtures/culprit_*/) with ExecuTorch 1.5.1.

Dev script, never run by CI (oracle virtualenv)::

    /root/.cache/numdiff-oracle/bin/python scripts/make_culprit_fixtures.py [--only NAME] [--list] [--example]

For each spec of ``scripts/_culprit_models.py`` the same architecture is exported twice with the
same seed: the correct model gives the ETRecord; a twin with one op's weights, bias, quantization
scale or activation constant changed gives the program that runs. The runtime (Python bindings)
writes the ETDump and debug buffer of the twin's program. The script checks that both programs
have the same debug-handle and delegate maps (the graphs are identical in structure), then writes
``truth.json``: the planted op(s) as ATen node names of the ETRecord's ``exported_program``.
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import sys
import warnings
import zlib
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _culprit_models as cm  # noqa: E402
import _fixture_runtime as rt  # noqa: E402
from make_fixtures import _calibration, _xnnpack_quantizer  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"
EXAMPLES = REPO / "numdiff" / "examples"
#: Bundled example (``numdiff.examples.example_files("planted_culprit")``): a copy of this spec.
EXAMPLE = ("planted_culprit", "culprit_mlp")


def _module_path(node: torch.fx.Node) -> list[str]:
    stack = node.meta.get("nn_module_stack") or {}
    out = []
    for value in stack.values():
        path = str(value[0] if isinstance(value, (tuple, list)) else value)
        out.append(path.replace("L['self'].", "").replace("L__self___", ""))
    return out


def _planted_nodes(graph: torch.fx.Graph, planted: str) -> list[str]:
    """ATen node names of one planted site."""
    calls = [n for n in graph.nodes if n.op == "call_function"]
    if planted.startswith("quant:"):
        module = planted.split(":", 1)[1]
        for n in calls:
            if "quantize_per_tensor" in str(n.target) and "dequantize" not in str(n.target):
                src = n.args[0]
                if isinstance(src, torch.fx.Node) and _module_path(src)[-1:] == [module]:
                    return [n.name]
        raise RuntimeError(f"no quantize node after {module}")
    names = [n.name for n in calls if _module_path(n)[-1:] == [planted]]
    if not names:
        names = [n.name for n in calls if n.name.startswith(planted)]
    if not names:
        raise RuntimeError(f"planted site {planted!r} matches no node")
    return names


def _scale_planted_quantize(gm: torch.fx.GraphModule, module: str, factor: float) -> None:
    for n in gm.graph.nodes:
        if n.op == "call_function" and "quantize_per_tensor" in str(n.target) and "dequantize" not in str(n.target):
            src = n.args[0]
            if isinstance(src, torch.fx.Node) and _module_path(src)[-1:] == [module]:
                args = list(n.args)
                args[1] = float(args[1]) * factor
                n.args = tuple(args)
                gm.recompile()
                return
    raise RuntimeError(f"no quantize node after {module} in the converted module")


def _dynamic_quantizer() -> Any:
    """Dynamic int8 activations (quantized at run time), per-channel int8 weights (as scripts/make_zoo.py's int8dyn)."""
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )

    return XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True, is_dynamic=True))


def _lower_quant(model: torch.nn.Module, example: rt.Inputs, spec: cm.CulpritSpec, twin: bool) -> rt.Lowered:
    import executorch.kernels.quantized  # noqa: F401
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    prepared = prepare_pt2e(torch.export.export(model, example).module(),
                            _dynamic_quantizer() if spec.lowering == "quantdyn_xnnpack" else _xnnpack_quantizer())
    for inp in _calibration(example):
        prepared(*inp)
    converted = convert_pt2e(prepared)
    if twin and spec.scale_factor is not None:
        module = next(p.split(":", 1)[1] for p in spec.planted if p.startswith("quant:"))
        _scale_planted_quantize(converted, module, spec.scale_factor)
    partitioners: list[Any] = []
    if spec.lowering in ("quant_xnnpack", "quantdyn_xnnpack"):
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        partitioners = [XnnpackPartitioner()]
    edge = to_edge_transform_and_lower(torch.export.export(converted, example), partitioner=partitioners,
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False),
                                       generate_etrecord=True)
    program = edge.to_executorch()
    return rt.Lowered(program.buffer, program.get_etrecord(), converted)


def _lower(model: torch.nn.Module, example: rt.Inputs, spec: cm.CulpritSpec, twin: bool) -> rt.Lowered:
    if spec.lowering.startswith("quant"):
        return _lower_quant(model, example, spec, twin)
    partitioners: list[Any] = []
    if spec.lowering == "xnnpack":
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        partitioners = [XnnpackPartitioner()]
    return rt.export_and_lower(model, example, partitioners=partitioners)


def build(spec: cm.CulpritSpec, out_root: Path, folder: str | None = None) -> dict[str, Any]:
    seed = zlib.crc32(spec.name.encode()) & 0x7FFFFFFF
    torch.manual_seed(seed)
    model = spec.make_model().eval()
    twin = copy.deepcopy(model)
    spec.plant(twin)
    example = (torch.randn(*spec.input_shape),)
    good = _lower(model, example, spec, twin=False)
    bad = _lower(twin, example, spec, twin=True)
    assert good.etrecord is not None and bad.etrecord is not None
    for attr in ("_debug_handle_map", "_delegate_map"):
        if getattr(good.etrecord, attr) != getattr(bad.etrecord, attr):
            raise RuntimeError(f"{spec.name}: {attr} differs between the model and its twin")
    if spec.plant is cm.nothing and spec.scale_factor is None and good.buffer != bad.buffer:
        raise RuntimeError(f"{spec.name}: clean twin compiled to a different program")

    out_dir = out_root / (folder or spec.name)
    out_dir.mkdir(parents=True, exist_ok=True)
    rt.save_etrecord(good, out_dir / "etrecord.bin", example)
    run = example
    if spec.run_noise:
        (x,) = example
        noise = torch.randn(x.shape, generator=torch.Generator().manual_seed(seed + 1))
        run = (x + spec.run_noise * float(x.pow(2).mean().sqrt()) * noise,)
        torch.save([run], out_dir / "run_inputs.pt")
    rt.run_with_etdump(bad.buffer, [run], out_dir, debug_buffer=True)
    graph = good.etrecord.exported_program.graph
    truth = {
        "generator": {"executorch": "1.5.1", "torch": torch.__version__, "script": "scripts/make_culprit_fixtures.py"},
        "model": spec.description,
        "lowering": spec.lowering,
        "planted": [{"site": p, "aot_ops": _planted_nodes(graph, p)} for p in spec.planted],
        **({"run_noise": spec.run_noise} if spec.run_noise else {}),
    }
    with open(out_dir / "truth.json", "w") as f:
        json.dump(truth, f, indent=1)
        f.write("\n")
    return truth


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--out", type=Path, default=FIXTURES)
    parser.add_argument("--example", action="store_true",
                        help=f"also write the bundled example numdiff/examples/{EXAMPLE[0]}/ (spec {EXAMPLE[1]})")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(s.name for s in cm.SPECS))
        return 0
    logging.getLogger().setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    for spec in cm.SPECS:
        if args.only and spec.name not in args.only:
            continue
        truth = build(spec, args.out)
        print(f"{spec.name}: planted {truth['planted']}", file=sys.stderr)
    if args.example:
        spec = next(s for s in cm.SPECS if s.name == EXAMPLE[1])
        build(spec, EXAMPLES, EXAMPLE[0])
        print(f"example {EXAMPLE[0]} written", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
