"""Write the deeper-localization fixtures (tests/fixtures/deeper_*/) with ExecuTorch 1.5.1.

Dev script, never run by CI (oracle virtualenv)::

    /root/.cache/numdiff-oracle/bin/python scripts/make_deeper_fixtures.py [--only NAME]

``deeper_quant``: a PT2E int8 model (XNNPACKQuantizer, per-tensor, portable + quantized kernels)
whose fc2 is made sensitive to weight quantization (an outlier weight column, see
``_deeper_models.SensitiveMLP``). The ETRecord and the program that runs are the quantized model;
``float_etrecord.bin`` is the float model exported the same way (the ``float_program=``), and
``float_program.pt2`` the same float export saved by ``torch.export.save`` (``--only deeper_quant_pt2``).
``truth.json`` names the sensitive layer.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _deeper_models as dm  # noqa: E402
import _fixture_runtime as rt  # noqa: E402
from make_culprit_fixtures import _lower_quant  # noqa: E402
import _culprit_models as cm  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"
GENERATOR = {"executorch": "1.5.1", "torch": torch.__version__, "script": "scripts/make_deeper_fixtures.py"}


def build_quant(out_root: Path) -> dict[str, Any]:
    torch.manual_seed(7)
    model = dm.SensitiveMLP().eval()
    example = (torch.randn(4, 8),)
    spec = cm.CulpritSpec("deeper_quant", "", dm.SensitiveMLP, cm.nothing, (), (4, 8), lowering="quant_portable")
    quant = _lower_quant(model, example, spec, twin=False)
    out_dir = out_root / "deeper_quant"
    out_dir.mkdir(parents=True, exist_ok=True)
    rt.save_etrecord(quant, out_dir / "etrecord.bin", example)
    rt.run_with_etdump(quant.buffer, [example], out_dir, debug_buffer=True)
    float_lowered = rt.export_and_lower(model, example)
    rt.save_etrecord(float_lowered, out_dir / "float_etrecord.bin", example)
    truth = {"generator": GENERATOR, "model": dm.SensitiveMLP.__doc__.splitlines()[0] if dm.SensitiveMLP.__doc__ else "",
             "lowering": "quant_portable", "sensitive_layer": {"module": "fc2", "op": "linear"}}
    (out_dir / "truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    return truth


def build_quant_pt2(out_root: Path) -> dict[str, Any]:
    """``deeper_quant/float_program.pt2``: the same float model (same seed) saved by torch.export.save.

    A separate builder so that the .pt2 can be added without regenerating the rest of the fixture.
    """
    torch.manual_seed(7)
    model = dm.SensitiveMLP().eval()
    example = (torch.randn(4, 8),)
    out_dir = out_root / "deeper_quant"
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.export.save(torch.export.export(model, example), out_dir / "float_program.pt2")
    return {"float_program.pt2": (out_dir / "float_program.pt2").stat().st_size}


BUILDERS = {"deeper_quant": build_quant, "deeper_quant_pt2": build_quant_pt2}


def main(argv: list[str] | None = None) -> int:
    return rt.build_main(__doc__.splitlines()[0], BUILDERS, FIXTURES, argv)



def _generate(program: bytes, prompt: list[int], steps: int, cache_shape: tuple[int, ...]) -> list[tuple[Any, ...]]:
    """Run the program one token per run (prompt, then greedy decode): each run's inputs."""
    from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer

    module = _load_for_executorch_from_buffer(program)
    k, v = torch.zeros(cache_shape), torch.zeros(cache_shape)
    token, runs = prompt[0], []
    for pos in range(len(prompt) + steps):
        if pos < len(prompt):
            token = prompt[pos]
        inputs = (torch.tensor([[token]]), torch.tensor([pos]), k.clone(), v.clone())
        runs.append(inputs)
        logits, k, v = module.run_method("forward", inputs)
        token = int(logits.argmax())
    return runs


def build_decode(out_root: Path) -> dict[str, Any]:
    import copy

    torch.manual_seed(11)
    model = dm.DecodeStep().eval()
    twin = copy.deepcopy(model)
    bad_from = 4
    dm.bad_rope_from(bad_from, 1.5)(twin)
    shape = (1, model.heads, model.max_seq, model.head_dim)
    example = (torch.tensor([[3]]), torch.tensor([0]), torch.zeros(shape), torch.zeros(shape))
    good = rt.export_and_lower(model, example)
    bad = rt.export_and_lower(twin, example)
    assert good.etrecord is not None and bad.etrecord is not None
    for attr in ("_debug_handle_map", "_delegate_map"):
        if getattr(good.etrecord, attr) != getattr(bad.etrecord, attr):
            raise RuntimeError(f"decode: {attr} differs between the model and its twin")
    prompt = [3, 11]
    runs = _generate(bad.buffer, prompt, 4, shape)
    out_dir = out_root / "deeper_decode"
    out_dir.mkdir(parents=True, exist_ok=True)
    rt.save_etrecord(good, out_dir / "etrecord.bin", runs[0])
    rt.run_with_etdump(bad.buffer, runs, out_dir, debug_buffer=True)
    torch.save([list(r) for r in runs], out_dir / "step_inputs.pt")
    graph = good.etrecord.exported_program.graph
    planted = [n.name for n in graph.nodes if n.op == "call_function" and "index_select" in str(n.target)]
    truth = {"generator": GENERATOR, "model": (dm.DecodeStep.__doc__ or "").splitlines()[0],
             "runs": len(runs), "prompt_tokens": len(prompt), "first_bad_step": bad_from,
             "plant": f"twin's rotary cos/sin rows for positions >= {bad_from} x1.5",
             "planted_aot_ops": planted}
    (out_dir / "truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    return truth


BUILDERS["deeper_decode"] = build_decode



def build_taps(out_root: Path) -> dict[str, Any]:
    """fp32 MLP fully inside one XNNPACK delegate, twin (fc2 weights + N(0, 0.05)) exported with
    FULL_TENSOR taps on every op; the ETRecord is the correct model's, untapped."""
    import copy

    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.devtools.intermediate_output_tap import (
        FULL_TENSOR,
        select_all_call_function,
        strip_taps_,
        tap_intermediate_outputs_,
    )
    from executorch.exir import to_edge_transform_and_lower

    sys.path.insert(0, str(REPO))
    from numdiff.export_helpers.taps import write_tap_sidecar

    torch.manual_seed(5)
    model = cm.MLP3().eval()
    twin = copy.deepcopy(model)
    cm.bump_weight("fc2", 0.05)(twin)
    example = (torch.randn(2, 8),)
    good = rt.export_and_lower(model, example, partitioners=[XnnpackPartitioner()])
    ep = torch.export.export(twin, example)
    ep, specs = tap_intermediate_outputs_(ep, (select_all_call_function(), FULL_TENSOR))
    edge = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])
    strip_taps_(edge)
    program = edge.to_executorch()
    out_dir = out_root / "deeper_taps"
    out_dir.mkdir(parents=True, exist_ok=True)
    rt.save_etrecord(good, out_dir / "etrecord.bin", example)
    rt.run_with_etdump(program.buffer, [example], out_dir, debug_buffer=True)
    write_tap_sidecar(specs, out_dir / "taps.json", user_outputs=1)
    from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer

    outputs = _load_for_executorch_from_buffer(program.buffer).run_method("forward", example)
    torch.save([o.clone() for o in outputs], out_dir / "tap_outputs.pt")
    graph = good.etrecord.exported_program.graph
    planted = [n.name for n in graph.nodes if n.op == "call_function" and "fc2" in str(n.meta.get("nn_module_stack"))]
    truth = {"generator": GENERATOR, "model": "fp32 MLP3 in one XNNPACK delegate; twin fc2 weights + N(0, 0.05), "
             "tapped (FULL_TENSOR, every op)", "planted_aot_ops": planted, "taps": len(specs)}
    (out_dir / "truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    return truth


BUILDERS["deeper_taps"] = build_taps


if __name__ == "__main__":
    raise SystemExit(main())
