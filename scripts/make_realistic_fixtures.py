"""Realistic-model fixtures (issue 8): artifacts written by ExecuTorch 1.5.1 and the reference's answers.

Dev script, never run by CI; oracle virtualenv (ExecuTorch 1.5.1, torch 2.13.0)::

    /root/.cache/numdiff-oracle/bin/python scripts/make_realistic_fixtures.py            # all
    /root/.cache/numdiff-oracle/bin/python scripts/make_realistic_fixtures.py --only real_llama
    /root/.cache/numdiff-oracle/bin/python scripts/make_realistic_fixtures.py --list

Each fixture goes to ``tests/fixtures/realistic/<name>/`` (a subfolder, so the
generic fixture tests, which walk ``tests/fixtures/*/expected.json``, do not pick
these up; ``tests/test_realistic_models.py`` does). The export/lower/run/record
steps are those of ``scripts/make_fixtures.py`` (imported, not copied); only the
models (``scripts/_realistic_models.py``), the lowering variants (dynamic shapes,
several methods, fp16) and the inline-value limit differ. ``expected.json`` has
the layout of ``tests/fixtures/README.md`` (gzipped: ``expected.json.gz``, as
the printed tables of a 300-event model are large), except that tensors with more than
``INLINE_NUMEL`` elements are stored as a SHA-256 of their bytes (the layout's
``"sha256"`` form) to keep each folder small. A fixture the oracle cannot
export or run gets only ``expected.json`` with ``"build_error"``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import sys
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _fixture_record as record  # noqa: E402
import _fixture_runtime as rt  # noqa: E402
import _realistic_models as rm  # noqa: E402
import make_fixtures as mf  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
OUT_ROOT = REPO / "tests" / "fixtures" / "realistic"
INLINE_NUMEL = 48
SCRIPT = "scripts/make_realistic_fixtures.py"


# ----------------------------------------------------------------------------- lowering variants


def lower_xnnpack_fp32(model: torch.nn.Module, example: rt.Inputs, runs: list[rt.Inputs]) -> rt.Lowered:
    return mf.lower_xnnpack(model, example, runs)


def lower_cond(model: torch.nn.Module, example: rt.Inputs, runs: list[rt.Inputs]) -> rt.Lowered:
    # to_edge keeps torch.cond as a higher-order op with true/false subgraphs.
    return rt.export_and_lower(model, example, use_to_edge=True)


def lower_dynamic(model: torch.nn.Module, example: rt.Inputs, runs: list[rt.Inputs]) -> rt.Lowered:
    from executorch.exir import to_edge_transform_and_lower

    seq = torch.export.Dim("seq", min=1, max=8)
    ep = torch.export.export(model.eval(), example, dynamic_shapes=({1: seq},))
    edge = to_edge_transform_and_lower(ep, generate_etrecord=True)
    et_program = edge.to_executorch()
    return rt.Lowered(et_program.buffer, et_program.get_etrecord(), model)


def lower_two_methods(model: torch.nn.Module, example: rt.Inputs, runs: list[rt.Inputs]) -> rt.Lowered:
    from executorch.exir import to_edge_transform_and_lower

    assert isinstance(model, rm.EncoderDecoder)
    code = torch.randn(2, 4, generator=torch.Generator().manual_seed(7))
    programs = {
        "forward": torch.export.export(model, (code,)),
        "encode": torch.export.export(rm.EncodeMethod(model).eval(), example),
    }
    edge = to_edge_transform_and_lower(programs, generate_etrecord=True)
    et_program = edge.to_executorch()
    return rt.Lowered(et_program.buffer, et_program.get_etrecord(), model)


def lower_fp16(model: torch.nn.Module, example: rt.Inputs, runs: list[rt.Inputs]) -> rt.Lowered:
    return rt.export_and_lower(model.half(), example)


# ----------------------------------------------------------------------------- running variants


def run_methods(plan: Sequence[str]) -> rt.RunOnce:
    """A RunOnce that runs run ``i`` with method ``plan[i]`` (Python bindings)."""

    def run(program: bytes, runs: Sequence[rt.Inputs], etdump_path: Path,
            debug_buffer_path: Path | None, debug_buffer_size: int) -> None:
        from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer

        module = _load_for_executorch_from_buffer(
            program, enable_etdump=True, debug_buffer_size=debug_buffer_size
        )
        for method, inp in zip(plan, runs, strict=True):
            module.run_method(method, tuple(inp))
        module.write_etdump_result_to_file(
            str(etdump_path), None if debug_buffer_path is None else str(debug_buffer_path)
        )

    return run


# ----------------------------------------------------------------------------- inputs


def _tokens() -> list[rt.Inputs]:
    return [(torch.randint(0, 64, (1, 8)),)]


def _dynamic_inputs() -> list[rt.Inputs]:
    return [(torch.randn(1, 4, 8),), (torch.randn(1, 6, 8),)]


def _two_method_inputs() -> list[rt.Inputs]:
    x = torch.randn(2, 8)
    code = torch.randn(2, 4, generator=torch.Generator().manual_seed(7))
    return [(x,), (code,)]  # run 0: encode(x); run 1: forward(code)


def _half(shape: tuple[int, ...]) -> Callable[[], list[rt.Inputs]]:
    def make() -> list[rt.Inputs]:
        return [(torch.randn(*shape).half(),)] * 2

    return make


@dataclass(frozen=True)
class Real:
    spec: mf.Spec
    #: representative input saved in the ETRecord (default: the first run's input)
    representative: Callable[[list[rt.Inputs]], rt.Inputs] = lambda runs: runs[0]


REALS: list[Real] = [
    Real(mf.Spec(
        name="real_mobilenet_xnn_int8",
        description=(
            "TinyMobileNet: stem ConvBNReLU6(3,8,s2), DepthwiseSeparable(8,8) with residual, "
            "DepthwiseSeparable(8,16,s2), AdaptiveAvgPool2d, Linear(16,10); BatchNorm with random stats; "
            "input (1,3,16,16); PT2E int8 (XNNPACKQuantizer symmetric per-tensor, 9 calibration inputs) "
            "lowered with XnnpackPartitioner; run once"
        ),
        make_model=rm.tiny_mobilenet,
        make_inputs=mf._same_input((1, 3, 16, 16), 1),
        lower=mf.lower_quant_xnnpack,
    )),
    Real(mf.Spec(
        name="real_llama",
        description=(
            "TinyLlama: Embedding(64,32), 2 blocks (RMSNorm, attention with 4 query heads / 2 KV heads "
            "(GQA, repeat_kv by expand+reshape), interleaved RoPE, causal mask, SwiGLU hidden 64), RMSNorm, "
            "LM head; tokens (1,8) int64; fp32 portable kernels; run once"
        ),
        make_model=rm.TinyLlama,
        make_inputs=_tokens,
        lower=mf.lower_portable,
    )),
    Real(mf.Spec(
        name="real_llama_xnn",
        description="the real_llama model and tokens, fp32, lowered with XnnpackPartitioner; run once",
        make_model=rm.TinyLlama,
        make_inputs=_tokens,
        lower=lower_xnnpack_fp32,
    )),
    Real(mf.Spec(
        name="real_lstm_gru",
        description=(
            "LSTM(6,8) -> GRU(8,8) (batch_first) -> Linear(8,3) on the last step; input (1,5,6); "
            "fp32 portable kernels; run once"
        ),
        make_model=rm.LstmGru,
        make_inputs=mf._same_input((1, 5, 6), 1),
        lower=mf.lower_portable,
    )),
    Real(mf.Spec(
        name="real_cond",
        description=(
            "Linear(8,8)-relu, torch.cond(h.sum() > 1, tanh(Linear(h)), sigmoid(Linear(h)) - h), Linear(8,4); "
            "input (2,8); to_edge (cond kept as a higher-order op), portable kernels; run once"
        ),
        make_model=rm.CondModel,
        make_inputs=mf._same_input((2, 8), 1),
        lower=lower_cond,
    )),
    Real(mf.Spec(
        name="real_dynamic",
        description=(
            "DynamicMLP Linear(8,16)-gelu, softmax over the sequence, Linear(16,8); exported with "
            "Dim('seq', 1..8) on dim 1; portable kernels; run twice with DIFFERENT sizes (1,4,8) then "
            "(1,6,8); ETRecord representative input = the first"
        ),
        make_model=rm.DynamicMLP,
        make_inputs=_dynamic_inputs,
        lower=lower_dynamic,
    )),
    Real(mf.Spec(
        name="real_dynamic_one_size",
        description="the real_dynamic program (Dim('seq', 1..8)) run once with input (1,4,8)",
        make_model=rm.DynamicMLP,
        make_inputs=lambda: _dynamic_inputs()[:1],
        lower=lower_dynamic,
    )),
    Real(mf.Spec(
        name="real_quant_portable_int8",
        description=(
            "ConvLinearQ Conv2d(2,4,3,p1)-relu-Conv2d(4,4,3,s2)-relu-flatten-Linear(36,12)-relu-"
            "Linear(12,5); input (1,2,8,8); PT2E int8 (XNNPACKQuantizer symmetric per-tensor) NOT "
            "delegated: quantized_decomposed Q/DQ on portable + quantized kernels; run once"
        ),
        make_model=rm.ConvLinearQ,
        make_inputs=mf._same_input((1, 2, 8, 8), 1),
        lower=mf.lower_quant_portable,
    )),
    Real(mf.Spec(
        name="real_two_methods",
        description=(
            "EncoderDecoder exported as two methods from a dict of ExportedPrograms: encode = "
            "tanh(Linear(8,4)) on (2,8), forward = sigmoid(Linear(4,8)) on (2,4); portable kernels; "
            "run 0 = encode, run 1 = forward; ETRecord representative input = the encode input"
        ),
        make_model=rm.EncoderDecoder,
        make_inputs=_two_method_inputs,
        lower=lower_two_methods,
        run_once=run_methods(("encode", "forward")),
    )),
    Real(mf.Spec(
        name="real_fp16",
        description=(
            "HalfConvNet Conv2d(2,4,3)-relu-mean-Linear(4,3) in float16, input (1,2,6,6) float16; "
            "portable kernels; run twice; profiling only (NO debug buffer: the 1.5.1 runtime cannot log "
            "half tensors) + ETRecord"
        ),
        make_model=rm.HalfConvNet,
        make_inputs=_half((1, 2, 6, 6)),
        lower=lower_fp16,
        debug_buffer=False,
    )),
]


def build(real: Real, out_root: Path) -> dict[str, Any]:
    spec = real.spec
    out_dir = out_root / spec.name
    mf._clean(out_dir)
    torch.manual_seed(mf._seed(spec.name))
    try:
        model = spec.make_model().eval()
        run_inputs = spec.make_inputs()
        lowered = spec.lower(model, run_inputs[0], run_inputs)
        files: dict[str, str | None] = {
            "etdump": "etdump.etdp",
            "debug_buffer": "debug_buffer.bin" if spec.debug_buffer else None,
            "etrecord": "etrecord.bin" if spec.etrecord else None,
        }
        if spec.etrecord:
            rep = real.representative(run_inputs)
            if spec.name == "real_two_methods":
                _save_two_method_etrecord(lowered, out_dir / "etrecord.bin", rep)
            else:
                rt.save_etrecord(lowered, out_dir / "etrecord.bin", rep)
        rt.run_with_etdump(
            lowered.buffer, run_inputs, out_dir, debug_buffer=spec.debug_buffer, run_once=spec.run_once
        )
    except Exception as e:  # noqa: BLE001 - an unbuildable model is recorded, not fatal
        traceback.print_exc()
        expected = {"generator": {"executorch": "1.5.1", "torch": torch.__version__, "script": SCRIPT},
                    "model": spec.description, "build_error": record.error_record(e)["error"]}
        _write(out_dir, expected)
        return expected

    expected = mf.record_expected(spec, out_dir, files, len(run_inputs))
    expected["generator"]["script"] = SCRIPT
    expected["generator"]["inline_numel"] = INLINE_NUMEL
    _write(out_dir, expected)
    return expected


def _save_two_method_etrecord(lowered: rt.Lowered, path: Path, representative: rt.Inputs) -> None:
    """Representative input of the encode method, reference outputs per method."""
    assert lowered.etrecord is not None and isinstance(lowered.reference_module, rm.EncoderDecoder)
    model = lowered.reference_module
    code = torch.randn(2, 4, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        outs = {"encode": [[model.encode(*representative)]], "forward": [[model(code)]]}
    lowered.etrecord.update_representative_inputs([representative])
    lowered.etrecord.update_reference_outputs(outs)
    lowered.etrecord.save(str(path))


def _write(out_dir: Path, expected: dict[str, Any]) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "expected.json").unlink(missing_ok=True)  # make_fixtures' name; ours is gzipped
    text = json.dumps(expected, allow_nan=True, indent=1) + "\n"
    # mtime=0: the same answers give the same bytes
    (out_dir / "expected.json.gz").write_bytes(gzip.compress(text.encode(), mtime=0))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", default=[], help="fixture name (repeatable)")
    parser.add_argument("--list", action="store_true", help="list fixture names and exit")
    parser.add_argument("--out", type=Path, default=OUT_ROOT, help="write <OUT>/<name>/ (default: the repo)")
    args = parser.parse_args(argv)
    by_name = {r.spec.name: r for r in REALS}
    if args.list:
        print("\n".join(by_name))
        return 0
    unknown = [n for n in args.only if n not in by_name]
    if unknown:
        print(f"unknown fixture(s) {unknown}; known: {list(by_name)}", file=sys.stderr)
        return 2
    record.MAX_INLINE_NUMEL = INLINE_NUMEL
    logging.getLogger().setLevel(logging.ERROR)
    warnings.simplefilter("ignore", FutureWarning)
    for real in REALS:
        if args.only and real.spec.name not in args.only:
            continue
        print(f"== {real.spec.name}", file=sys.stderr)
        expected = build(real, args.out)
        if "build_error" in expected:
            print(f"{real.spec.name}: BUILD ERROR {expected['build_error']}", file=sys.stderr)
        else:
            print(mf._summary(real.spec.name, expected), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
