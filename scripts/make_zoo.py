"""Write numdiff's model zoo with ExecuTorch 1.5.1: clean controls and planted twins (oracle venv).

Dev script, never run by CI. Usually called by ``scripts/zoo.py`` (numdiff's venv), which also scores
numdiff on what this writes::

    /root/.cache/numdiff-oracle/bin/python scripts/make_zoo.py --out DIR [--only ARCH] [--backends ...]
        [--twins 3] [--jobs 2] [--realsize | --heldout | --heldout2]

``--realsize`` generates the real-size architectures instead (``_zoo_models.REALSIZE``, family
``realsize``: MobileNetV2, ResNet-18, ... at the sizes users run; 4-12 minutes each on one core,
about 1 GB each); ``--heldout`` the held-out ones (``_zoo_models.HELDOUT``, family ``heldout``:
architectures numdiff was never tuned on, small like the default zoo's); ``--heldout2`` a second
held-out set (``_zoo_models.HELDOUT2``, written after numdiff was measured on the first).
``--only`` may name any of them; the default zoo never holds them.

For every architecture of ``scripts/_zoo_models.py`` and every backend where it lowers (portable
fp32, XNNPACK fp32, PT2E int8 on the portable + quantized kernels, PT2E int8 on XNNPACK), the
correct model is exported once: its ETRecord is ``DIR/<arch>/<backend>/etrecord.bin`` and its own
run is the control ``clean/``. Each twin ``twin<k>/`` is the same program with one perturbation of
graded size at a random site (a weight, a bias, a quantization scale, a constant of ``forward`` or
an activation bound), run by the runtime under the correct model's ETRecord.

fp32 twins perturb the ``nn.Module``; int8 twins perturb the converted PT2E graph after calibration
(its int8 weights, its biases, or one quantize node's scale), so that every other quantization
parameter is the control's. The truth is not what the script meant to plant but what differs:
the ATen programs of the two ETRecords are diffed node by node (literal arguments and the tensors
behind each placeholder), and the nodes reading a difference are the planted ops. A twin whose
program does not differ (the perturbation vanished, e.g. under int8 rounding) is dropped and
counted. ``truth.json`` also records the perturbation's effect on the planted op's output and on
the program's outputs (the twin's reference graph against the control's, same input), so a miss
can be told apart from a fault nothing could see.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import copy
import json
import logging
import math
import random
import sys
import time
import traceback
import warnings
import zlib
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _fixture_runtime as rt  # noqa: E402
import _zoo_models as zm  # noqa: E402

BACKENDS = ("portable", "xnnpack", "int8_portable", "int8_xnnpack", "int8dyn_xnnpack")
#: ``int8dyn_xnnpack``: dynamic quantization (int8 activations quantized at run time by
#: ``choose_qparams``, per-channel int8 weights) of the linear layers, delegated to XNNPACK: the way
#: language models usually ship.
#: Graded sizes per perturbation kind: small, medium, large (relative magnitudes, see _plant_*).
SIZES: dict[str, tuple[float, float, float]] = {
    "weight": (0.003, 0.03, 0.3),
    "bias": (0.003, 0.03, 0.3),
    "constant": (0.002, 0.02, 0.2),
    "bound": (0.05, 0.3, 0.7),
    "scale": (0.01, 0.1, 0.4),
}
GRADES = ("small", "medium", "large")
#: Ops that only move, cast or dequantize data: the planted site extends through them to the op
#: that computes with the perturbed value (matched on the op's own name: ``conv_transpose2d`` is
#: not a ``transpose``).
_TRANSPARENT = frozenset({"dequantize_per_tensor", "dequantize_per_channel", "quantize_per_tensor",
                          "quantize_per_channel", "permute", "transpose", "t", "view", "reshape", "expand",
                          "_to_copy", "clone", "unsqueeze", "squeeze", "contiguous", "alias", "detach", "slice",
                          "select"})


def _op_name(target: Any) -> str:
    """``aten.transpose.int`` -> ``transpose``."""
    parts = str(target).split(".")
    return parts[-2] if len(parts) >= 2 else parts[0]


def _seed(*parts: str) -> int:
    return zlib.crc32("/".join(parts).encode()) & 0x7FFFFFFF


# --- lowering --------------------------------------------------------------------------------------


def _quantizer(backend: str) -> Any:
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )

    if backend.startswith("int8dyn"):
        return XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True, is_dynamic=True))
    return XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=False))


def _partitioners(backend: str) -> list[Any]:
    if "xnnpack" not in backend:
        return []
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    return [XnnpackPartitioner()]


def _lower_graph(graph_module: torch.nn.Module, example: zm.Inputs, backend: str) -> rt.Lowered:
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

    config = EdgeCompileConfig(_check_ir_validity=False) if backend.startswith("int8") else None
    edge = to_edge_transform_and_lower(torch.export.export(graph_module, example), partitioner=_partitioners(backend),
                                       compile_config=config, generate_etrecord=True)
    program = edge.to_executorch()
    return rt.Lowered(program.buffer, program.get_etrecord(), graph_module)


def _converted(model: torch.nn.Module, example: zm.Inputs, calibration: list[zm.Inputs],
               backend: str) -> torch.fx.GraphModule:
    import executorch.kernels.quantized  # noqa: F401  (registers the quantize/dequantize kernels)
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    prepared = prepare_pt2e(torch.export.export(model, example).module(), _quantizer(backend))
    for inp in calibration:
        prepared(*inp)
    return convert_pt2e(prepared)


# --- plants ------------------------------------------------------------------------------------------


def _param_sites(model: torch.nn.Module, kind: str) -> list[str]:
    names = [n for n, p in model.named_parameters() if p.numel() > 0]
    if kind == "bias":
        return [n for n in names if n.endswith("bias")]
    return [n for n in names if not n.endswith("bias")]


def _plant_module(model: torch.nn.Module, kind: str, site: str, rel: float, gen: torch.Generator) -> None:
    """fp32 twins: change a parameter or an attribute of ``model`` in place."""
    if kind in ("weight", "bias"):
        p = model.get_parameter(site)
        with torch.no_grad():
            spread = max(float(p.std()) if p.numel() > 1 else 0.0, float(p.abs().mean()), 0.05)
            p.add_(torch.randn(p.shape, generator=gen) * rel * spread)
        return
    value = float(getattr(model, site))
    if kind == "constant":
        setattr(model, site, value * (1 + rel))
    else:  # bound: move it towards zero by rel of its size (a tighter activation limit)
        setattr(model, site, value * (1 - rel))


def _module_of(node: torch.fx.Node) -> str:
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    last = list(stack.values())[-1]
    return str(last[0] if isinstance(last, (tuple, list)) else last)


def _qparam_scales(gm: torch.fx.GraphModule) -> tuple[set[str], set[str]]:
    """``(scale, zero point)`` get_attr targets of the graph's (de)quantize nodes: a per-channel weight's
    quantization parameters, never a weight or a bias to perturb as one."""
    scales: set[str] = set()
    points: set[str] = set()
    for n in gm.graph.nodes:
        if n.op == "call_function" and "quantize" in str(n.target):
            for arg, into in zip(n.args[1:3], (scales, points)):
                if isinstance(arg, torch.fx.Node) and arg.op == "get_attr":
                    into.add(str(arg.target))
    return scales, points


def _graph_sites(gm: torch.fx.GraphModule, kind: str) -> list[str]:
    """int8 twins: get_attr targets (weights/biases; per-channel weight scales) or quantize nodes (static
    scales) of the converted graph."""
    scales, points = _qparam_scales(gm)
    if kind == "scale":
        static = [n.name for n in gm.graph.nodes if n.op == "call_function"
                  and "quantize_per_tensor" in str(n.target) and "dequantize" not in str(n.target)
                  and isinstance(n.args[0], torch.fx.Node) and n.args[0].op != "placeholder"
                  and isinstance(n.args[1], (int, float))]  # a scale fixed in the graph, not computed at run time
        return static or sorted(scales)  # dynamic quantization: only its weights' scales are fixed
    out = []
    for n in gm.graph.nodes:
        if n.op != "get_attr" or str(n.target) in scales or str(n.target) in points:
            continue
        t = getattr(gm, str(n.target), None)
        if not isinstance(t, torch.Tensor) or t.numel() < 2:
            continue
        is_int = not t.is_floating_point()
        is_bias = t.dim() == 1 and not is_int
        if (kind == "bias") == is_bias and (is_int or kind == "bias"):
            out.append(str(n.target))
    return out


def _plant_graph(gm: torch.fx.GraphModule, kind: str, site: str, rel: float, gen: torch.Generator) -> None:
    if kind == "scale" and isinstance(getattr(gm, site, None), torch.Tensor):  # a per-channel weight's scales
        setattr(gm, site, getattr(gm, site) * (1 + rel))  # stays positive, as XNNPACK requires
        return
    if kind == "scale":
        node = next(n for n in gm.graph.nodes if n.name == site)
        args = list(node.args)
        args[1] = float(args[1]) * (1 + rel)
        node.args = tuple(args)
        gm.recompile()
        return
    t = getattr(gm, site)
    if t.is_floating_point():
        spread = max(float(t.std()), float(t.abs().mean()), 0.05)
        new = t + torch.randn(t.shape, generator=gen) * rel * spread
    else:
        info = torch.iinfo(t.dtype)
        spread = max(float(t.float().std()), 1.0)
        noise = torch.round(torch.randn(t.shape, generator=gen) * rel * spread)
        new = torch.clamp(t.to(torch.float32) + noise, info.min + 1, info.max).to(t.dtype)
    if isinstance(t, torch.nn.Parameter):  # a float parameter no quantizer folded (a LayerScale under int8dyn)
        new = torch.nn.Parameter(new, requires_grad=False)
    setattr(gm, site, new)


# --- truth: diff the two ATen programs ------------------------------------------------------------


def _placeholder_tensors(ep: Any) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for spec in ep.graph_signature.input_specs:
        target = getattr(spec, "target", None)
        if target is None:
            continue
        value = ep.state_dict.get(target)
        if value is None:
            value = ep.constants.get(target)
        if isinstance(value, torch.Tensor):
            out[spec.arg.name] = value
    return out


def _literals(node: torch.fx.Node) -> str:
    def strip(a: Any) -> Any:
        if isinstance(a, torch.fx.Node):
            return "%"
        if isinstance(a, (list, tuple)):
            return [strip(x) for x in a]
        if isinstance(a, float):
            return repr(a)
        return repr(a)

    return repr((strip(list(node.args)), sorted((k, strip(v)) for k, v in node.kwargs.items())))


def diff_programs(clean: Any, twin: Any) -> tuple[list[str], list[str]]:
    """(planted ops, closure): the call_function nodes of ``clean`` reading something the twin changed,
    and those extended through data-movement/dequantize ops to the first computing op."""
    a_nodes, b_nodes = list(clean.graph.nodes), list(twin.graph.nodes)
    if [(n.op, str(n.target)) for n in a_nodes] != [(n.op, str(n.target)) for n in b_nodes]:
        raise RuntimeError("the twin's ATen program has another structure than the model's")
    ta, tb = _placeholder_tensors(clean), _placeholder_tensors(twin)
    changed = set()
    for a, b in zip(a_nodes, b_nodes):
        if a.op == "placeholder" and a.name in ta:
            x, y = ta[a.name], tb.get(b.name)
            if y is None or x.shape != y.shape or not torch.equal(x, y):
                changed.add(a.name)
    planted = []
    for a, b in zip(a_nodes, b_nodes):
        if a.op != "call_function":
            continue
        reads = {x.name for x in a.all_input_nodes}
        if reads & changed or _literals(a) != _literals(b):
            planted.append(a.name)
    return planted, closure_of(clean.graph, planted)


def closure_of(graph: torch.fx.Graph, planted: list[str]) -> list[str]:
    closure = list(planted)
    frontier = [n for n in graph.nodes if n.name in planted]
    while frontier:
        node = frontier.pop()
        if _op_name(node.target) not in _TRANSPARENT:
            continue
        for user in node.users:
            if user.op == "call_function" and user.name not in closure:
                closure.append(user.name)
                frontier.append(user)
    return closure


def recompute_closures(out: Path) -> int:
    """Rewrite every twin's ``closure`` from its planted ops (after a change of the closure rule)."""
    from executorch.devtools import parse_etrecord

    changed = 0
    for etrecord_path in sorted(out.glob("*/*/etrecord.bin")):
        graph = parse_etrecord(str(etrecord_path)).exported_program.graph
        for path in [etrecord_path.parent / CASES, *sorted(etrecord_path.parent.glob("twin*/truth.json"))]:
            if not path.is_file():
                continue
            data = json.loads(path.read_text())
            for record in data if isinstance(data, list) else [data]:
                if record.get("planted_aot_ops"):
                    new = closure_of(graph, record["planted_aot_ops"])
                    changed += new != record.get("closure")
                    record["closure"] = new
            path.write_text(json.dumps(data, indent=1) + "\n")
    return changed


def _node_outputs(ep: Any, inputs: zm.Inputs) -> dict[str, torch.Tensor]:
    gm = ep.module()
    seen: dict[str, torch.Tensor] = {}

    class Capture(torch.fx.Interpreter):
        def run_node(self, n: torch.fx.Node) -> Any:
            out = super().run_node(n)
            if isinstance(out, torch.Tensor):
                seen[n.name] = out.detach().clone()
            return out

    with torch.no_grad():
        result = Capture(gm).run(*inputs)
    flat = result if isinstance(result, (tuple, list)) else [result]
    for i, o in enumerate(flat):
        if isinstance(o, torch.Tensor):
            seen[f"__output_{i}"] = o.detach().clone()
    return seen


def _snr_db(ref: torch.Tensor, other: torch.Tensor) -> float | None:
    if ref.shape != other.shape or not ref.is_floating_point():
        if ref.shape == other.shape and torch.equal(ref, other):
            return math.inf
        ref, other = ref.float(), other.float()
        if ref.shape != other.shape:
            return None
    noise = float(((ref - other) ** 2).sum())
    signal = float((ref**2).sum())
    if noise == 0:
        return math.inf
    if signal == 0:
        return -math.inf
    return 10 * math.log10(signal / noise)


def _effect(clean: Any, twin: Any, closure: list[str], example: zm.Inputs) -> dict[str, Any]:
    """How much the perturbation changes the planted ops' outputs and the program's outputs."""
    try:
        a, b = _node_outputs(clean, example), _node_outputs(twin, example)
    except Exception as e:  # the reference graph does not run eagerly here: say so
        return {"error": f"{type(e).__name__}: {str(e)[:200]}"}
    planted = [(_snr_db(a[n], b[n]), n) for n in closure if n in a and n in b]
    finite = [s for s, _ in planted if s is not None]
    outputs = [_snr_db(a[k], b[k]) for k in a if k.startswith("__output_") and k in b]
    return {
        "planted_snr_db": min(finite) if finite else None,
        "output_snr_db": min((s for s in outputs if s is not None), default=None),
    }


def _js(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return "inf" if x > 0 else ("-inf" if x < 0 else "nan")
    if isinstance(x, dict):
        return {k: _js(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_js(v) for v in x]
    return x


# --- one architecture on one backend --------------------------------------------------------------


def build_case(arch_name: str, backend: str, out_root: str, twins: int,
               only_variant: str | None = None) -> list[dict[str, Any]]:
    """Export ``arch_name`` for ``backend``, run it clean, on other inputs and as twins; with
    ``only_variant`` (:data:`OTHER_INPUT` or :data:`NEAR_INPUT`), add just that run to a pair already
    written (its ETRecord is kept: the export is rebuilt only for the program's bytes)."""
    logging.getLogger().setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)  # one core per job: --jobs sets the parallelism
    arch = zm.arch(arch_name)
    base = {"arch": arch.name, "family": arch.family, "backend": backend}
    folder = Path(out_root) / arch.name / backend
    if backend.startswith("int8") and not arch.quantize:
        return [{**base, "variant": "clean", "status": "skipped", "reason": "no PT2E int8 export for this architecture"}]
    try:
        torch.manual_seed(_seed(arch.name))
        model = arch.make().eval()
        gen = torch.Generator().manual_seed(_seed(arch.name, "inputs"))
        example = arch.inputs(gen)
        calibration = [example] + [arch.inputs(gen) for _ in range(8)]
        reference: torch.nn.Module = model
        if backend.startswith("int8"):
            reference = _converted(model, example, calibration, backend)
        good = _lower_graph(reference, example, backend)
    except Exception as e:
        return [{**base, "variant": "clean", "status": "not-lowered", "reason": f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"}]

    folder.mkdir(parents=True, exist_ok=True)
    clean_ep = copy.deepcopy(good.etrecord.exported_program)
    if only_variant is None or not (folder / "etrecord.bin").is_file():
        rt.save_etrecord(good, folder / "etrecord.bin", example)
    results = []

    def run(program: bytes, variant: str, extra: dict[str, Any], inputs: zm.Inputs | None = None) -> dict[str, Any]:
        out = folder / variant
        out.mkdir(parents=True, exist_ok=True)
        record = {**base, "variant": variant, **extra}
        if inputs is not None:
            torch.save([tuple(inputs)], out / "run_inputs.pt")
        try:
            rt.run_with_etdump(program, [example if inputs is None else inputs], out, debug_buffer=True,
                               probe_size=REALSIZE_PROBE_BYTES if arch.family == "realsize" else rt.PROBE_DEBUG_BUFFER_SIZE)
        except Exception as e:
            record.update(status="runtime-failed", reason=f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}")
        else:
            record["status"] = "ok"
        (out / "truth.json").write_text(json.dumps(_js(record), indent=1) + "\n")
        return record

    # The clean program run on another draw of inputs than the ETRecord's representative ones (as devices
    # run): a control too, whose ops that read the graph input cannot be replayed on what the run read.
    # The representative input plus 1% noise (relative RMS) on every floating-point input: a device that
    # decodes or resizes its input slightly differently. Integer inputs (token ids) are kept.
    gen = torch.Generator().manual_seed(_seed(arch.name, "near-input"))
    near = tuple(x + NEAR_NOISE * float(x.pow(2).mean().sqrt()) * torch.randn(x.shape, generator=gen)
                 if x.is_floating_point() else x for x in example)
    if all(not x.is_floating_point() for x in example):
        near_input = {**base, "variant": NEAR_INPUT, "status": "skipped", "reason": "no floating-point input"}
    elif only_variant != OTHER_INPUT:
        near_input = run(good.buffer, NEAR_INPUT, {"plant": None, "planted_aot_ops": [], "closure": [],
                                                   "run_noise": NEAR_NOISE}, near)
    if only_variant == NEAR_INPUT:
        cases = folder / CASES
        kept = [c for c in json.loads(cases.read_text()) if c["variant"] != NEAR_INPUT] if cases.is_file() else []
        return kept + [near_input]
    other = arch.inputs(torch.Generator().manual_seed(_seed(arch.name, "other-input")))
    other_input = run(good.buffer, OTHER_INPUT, {"plant": None, "planted_aot_ops": [], "closure": []}, other)
    if only_variant == OTHER_INPUT:
        cases = folder / CASES
        kept = [c for c in json.loads(cases.read_text()) if c["variant"] != OTHER_INPUT] if cases.is_file() else []
        return kept + [other_input]
    results.append(run(good.buffer, "clean", {"plant": None, "planted_aot_ops": [], "closure": []}))
    results.append(other_input)
    results.append(near_input)
    rng = random.Random(_seed(arch.name, backend, "plants"))
    # dynamic quantization computes its activations' scales at run time: its "scale" is a weight's
    kinds = ["weight", "bias"] + (["scale"] if backend.startswith("int8") else [])
    if not backend.startswith("int8"):
        kinds += ["constant"] * bool(arch.constants) + ["bound"] * bool(arch.bounds)
    for k in range(twins):
        grade = GRADES[k % len(GRADES)]
        kind = kinds[(k + rng.randrange(len(kinds))) % len(kinds)]
        gen = torch.Generator().manual_seed(_seed(arch.name, backend, str(k)))
        plant: dict[str, Any] = {"kind": kind, "grade": grade, "size": SIZES[kind][GRADES.index(grade)]}
        try:
            if backend.startswith("int8"):
                assert isinstance(reference, torch.fx.GraphModule)
                sites = _graph_sites(reference, kind) or _graph_sites(reference, "weight")
                plant["site"] = rng.choice(sites)
                twin_ref = copy.deepcopy(reference)
                _plant_graph(twin_ref, kind if sites else "weight", plant["site"], plant["size"], gen)
            else:
                sites = (_param_sites(model, kind) if kind in ("weight", "bias")
                         else list(arch.constants if kind == "constant" else arch.bounds))
                if not sites:
                    kind = plant["kind"] = "weight"
                    sites = _param_sites(model, kind)
                plant["site"] = rng.choice(sites)
                twin_ref = copy.deepcopy(model)
                _plant_module(twin_ref, kind, plant["site"], plant["size"], gen)
            bad = _lower_graph(twin_ref, example, backend)
            for attr in ("_debug_handle_map", "_delegate_map"):
                if getattr(good.etrecord, attr) != getattr(bad.etrecord, attr):
                    raise RuntimeError(f"{attr} differs between the model and its twin")
            planted, closure = diff_programs(clean_ep, bad.etrecord.exported_program)
        except Exception as e:
            results.append({**base, "variant": f"twin{k}", "plant": plant, "status": "twin-failed",
                            "reason": f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"})
            continue
        if not planted or bad.buffer == good.buffer:
            results.append({**base, "variant": f"twin{k}", "plant": plant, "status": "no-change",
                            "reason": "the perturbation left the program unchanged (e.g. below int8 rounding)"})
            continue
        effect = _effect(clean_ep, bad.etrecord.exported_program, closure, example)
        results.append(run(bad.buffer, f"twin{k}", {"plant": plant, "planted_aot_ops": planted,
                                                     "closure": closure, "effect": effect}))
    return results


def _safe_build(arch: str, backend: str, out: str, twins: int, only_variant: str | None = None) -> list[dict[str, Any]]:
    folder = Path(out) / arch / backend
    if only_variant is not None:  # add to a pair already written; never overwrite it with a failure
        if not (folder / CASES).is_file():
            return []
        try:
            results = build_case(arch, backend, out, twins, only_variant=only_variant)
        except Exception:
            return [{"arch": arch, "backend": backend, "variant": only_variant, "status": "script-error",
                     "reason": traceback.format_exc(limit=3)[-400:]}]
        if any(r["variant"] == only_variant for r in results):
            (folder / CASES).write_text(json.dumps(_js(results), indent=1) + "\n")
        return [r for r in results if r["variant"] == only_variant]
    try:
        results = build_case(arch, backend, out, twins)
    except Exception:
        results = [{"arch": arch, "backend": backend, "variant": "clean", "status": "script-error",
                    "reason": traceback.format_exc(limit=3)[-400:]}]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / CASES).write_text(json.dumps(_js(results), indent=1) + "\n")
    return results


#: The debug buffer of a real-size model's first (probe) run: every intermediate output of a
#: MobileNetV2 or a BERT layer does not fit in the default 16 MB.
REALSIZE_PROBE_BYTES = 512 * 1024 * 1024
#: Per architecture and backend: every run written or dropped, with its status (lets a run resume).
CASES = "cases.json"
#: The clean program's run on other inputs than the representative ones (its inputs in run_inputs.pt).
OTHER_INPUT = "other_input"
#: The clean program's run on the representative inputs plus NEAR_NOISE (relative RMS) of noise.
NEAR_INPUT = "near_input"
NEAR_NOISE = 0.01


def collect(out: Path) -> list[dict[str, Any]]:
    """Every case recorded under ``out``, in a stable order."""
    results = [c for f in sorted(out.glob(f"*/*/{CASES}")) for c in json.loads(f.read_text())]
    results.sort(key=lambda r: (r["arch"], BACKENDS.index(r["backend"]), r["variant"]))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", action="append", default=[], help="architecture name (repeatable)")
    parser.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS)
    parser.add_argument("--twins", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--list", action="store_true", help="list the default zoo's architectures (with --realsize, "
                        "--heldout or --heldout2: that family's)")
    family = parser.add_mutually_exclusive_group()
    family.add_argument("--realsize", dest="family", action="store_const", const="realsize",
                        help="the real-size architectures (family 'realsize', never in the default zoo) instead")
    family.add_argument("--heldout", dest="family", action="store_const", const="heldout",
                        help="the held-out architectures (family 'heldout', never in the default zoo, never tuned "
                             "on) instead")
    family.add_argument("--heldout2", dest="family", action="store_const", const="heldout2",
                        help="the second held-out set (family 'heldout2', written after numdiff was measured on "
                             "the first) instead")
    parser.add_argument("--resume", action="store_true", help="skip architecture/backend pairs already written")
    parser.add_argument("--closures-only", action="store_true", help="only rewrite the twins' closures")
    parser.add_argument("--other-input-only", action="store_true",
                        help=f"only run each written pair's clean program on another input ({OTHER_INPUT}/)")
    parser.add_argument("--near-input-only", action="store_true",
                        help=f"only run each written pair's clean program on its representative input plus "
                             f"{NEAR_NOISE:.0%} noise ({NEAR_INPUT}/)")
    args = parser.parse_args(argv)
    chosen = zm.EXTRA_FAMILIES[args.family] if args.family else zm.ARCHS
    if args.list:
        print("\n".join(f"{a.name}\t{a.family}" for a in chosen))
        return 0
    if args.closures_only:
        print(f"{recompute_closures(args.out)} closures changed", file=sys.stderr)
        return 0
    every = zm.ARCHS + [a for f in zm.EXTRA_FAMILIES.values() for a in f]
    unknown = set(args.only) - {a.name for a in every}
    if unknown:
        parser.error(f"unknown architecture(s) {sorted(unknown)}: see --list and --list with --realsize, "
                     "--heldout or --heldout2")
    archs = [a.name for a in (every if args.only else chosen) if not args.only or a.name in args.only]
    jobs = [(a, b) for a in archs for b in args.backends
            if not (args.resume and (args.out / a / b / CASES).is_file())
            and not ((args.other_input_only or args.near_input_only) and not (args.out / a / b / CASES).is_file())]
    only_variant = OTHER_INPUT if args.other_input_only else NEAR_INPUT if args.near_input_only else None
    random.Random(0).shuffle(jobs)  # a partial zoo already spans architectures and backends
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with concurrent.futures.ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(_safe_build, a, b, str(args.out), args.twins, only_variant): (a, b)
                   for a, b in jobs}
        for fut in concurrent.futures.as_completed(futures):
            a, b = futures[fut]
            got = fut.result()
            states = ", ".join(f"{r['variant']}:{r['status']}" for r in got)
            print(f"{a}/{b}: {states} ({time.monotonic() - started:.0f} s since start)", file=sys.stderr, flush=True)
    index = {"generator": {"executorch": "1.5.1", "torch": torch.__version__, "script": "scripts/make_zoo.py"},
             "cases": collect(args.out)}
    (args.out / "index.json").write_text(json.dumps(index, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
