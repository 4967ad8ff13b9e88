"""Generate numdiff's real-artifact fixtures with ExecuTorch 1.5.1 and record the reference's answers.

Dev script, never run by CI. It needs the oracle virtualenv (ExecuTorch 1.5.1,
torch 2.13.0)::

    $(/work/shared/oracle-venv.sh) scripts/make_fixtures.py            # all fixtures
    $(/work/shared/oracle-venv.sh) scripts/make_fixtures.py --only mlp_fp32 --only xnnpack
    $(/work/shared/oracle-venv.sh) scripts/make_fixtures.py --list

For each fixture it exports and lowers a small model with fixed seeds, runs it
with the runtime's Python bindings (ETDump + debug buffer), writes the ETRecord
with one representative input and its reference output, then builds
ExecuTorch's own ``Inspector`` on the written files and stores its answers in
``expected.json`` (format: ``tests/fixtures/README.md``). Model, inputs and
debug data are reproducible; timings are not, so tests compare numdiff with
the ``expected.json`` committed together with the artifacts.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import sys
import warnings
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _fixture_models as models  # noqa: E402
import _fixture_record as record  # noqa: E402
import _fixture_runtime as rt  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"
EXAMPLES = REPO / "numdiff" / "examples"

#: Files this script owns in a fixture folder (others' *_expected.json are left alone).
OWNED_FILES = ("etdump.etdp", "debug_buffer.bin", "etrecord.bin", "expected.json")

Lower = Callable[[torch.nn.Module, rt.Inputs, list[rt.Inputs]], rt.Lowered]


@dataclass(frozen=True)
class Spec:
    """One fixture: how to build, lower and run the model, and what to record."""

    name: str
    description: str
    make_model: Callable[[], torch.nn.Module]
    make_inputs: Callable[[], list[rt.Inputs]]  # one tuple per run
    lower: Lower
    etrecord: bool = True
    debug_buffer: bool = True
    module_hierarchy_view: bool = False
    out_root: Path = FIXTURES
    run_once: rt.RunOnce = rt.run_pybindings
    extra: dict[str, Any] = field(default_factory=dict)


def lower_portable(model: torch.nn.Module, example: rt.Inputs, runs: list[rt.Inputs]) -> rt.Lowered:
    return rt.export_and_lower(model, example)


def lower_xnnpack(model: torch.nn.Module, example: rt.Inputs, runs: list[rt.Inputs]) -> rt.Lowered:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    return rt.export_and_lower(model, example, partitioners=[XnnpackPartitioner()])


def lower_var_mean(model: torch.nn.Module, example: rt.Inputs, runs: list[rt.Inputs]) -> rt.Lowered:
    # var_mean is not core ATen; the portable kernels do have var_mean.correction_out.
    return rt.export_and_lower(
        model, example, core_aten_exceptions=[torch.ops.aten.var_mean.correction]
    )


def _xnnpack_quantizer() -> Any:
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )

    return XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=False))


def lower_quant_xnnpack(model: torch.nn.Module, example: rt.Inputs, runs: list[rt.Inputs]) -> rt.Lowered:
    import executorch.kernels.quantized  # noqa: F401  (Q/DQ left outside the delegate)
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    return rt.export_and_lower(
        model,
        example,
        quantizer=_xnnpack_quantizer(),
        calibration=_calibration(example),
        partitioners=[XnnpackPartitioner()],
    )


def lower_quant_portable(model: torch.nn.Module, example: rt.Inputs, runs: list[rt.Inputs]) -> rt.Lowered:
    import executorch.kernels.quantized  # noqa: F401  (registers quantize/dequantize kernels)

    return rt.export_and_lower(
        model, example, quantizer=_xnnpack_quantizer(), calibration=_calibration(example)
    )


def _calibration(example: rt.Inputs) -> list[rt.Inputs]:
    gen = torch.Generator().manual_seed(1234)
    return [example] + [
        tuple(torch.randn(t.shape, generator=gen) for t in example) for _ in range(8)
    ]


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape)


def _same_input(shape: tuple[int, ...], runs: int) -> Callable[[], list[rt.Inputs]]:
    def make() -> list[rt.Inputs]:
        x = torch.randn(*shape)
        return [(x,)] * runs

    return make


def _different_inputs(shape: tuple[int, ...], runs: int) -> Callable[[], list[rt.Inputs]]:
    def make() -> list[rt.Inputs]:
        return [(torch.randn(*shape),) for _ in range(runs)]

    return make


SPECS: list[Spec] = [
    Spec(
        name="mlp_fp32",
        description=(
            "fp32 MLP Linear(8,16)-ReLU-Linear(16,4), input (2,8); to_edge_transform_and_lower "
            "without partitioner (portable kernels; each Linear is permute_copy+addmm sharing a "
            "debug handle); run 3 times with the same input"
        ),
        make_model=models.MLP,
        make_inputs=_same_input((2, 8), 3),
        lower=lower_portable,
    ),
    Spec(
        name="cnn_nested",
        description=(
            "fp32 CNN with nested submodules: features=Sequential(ConvBlock, ConvBlock), each ConvBlock "
            "= body Sequential(Conv2d, BatchNorm2d, ReLU) + MaxPool2d; head=Sequential(AvgPool2d, Flatten, "
            "Linear); input (1,3,8,8); portable kernels; run once; also recorded with "
            "enable_module_hierarchy=True"
        ),
        make_model=models.nested_cnn,
        make_inputs=_same_input((1, 3, 8, 8), 1),
        lower=lower_portable,
        module_hierarchy_view=True,
    ),
    Spec(
        name="xnnpack",
        description=(
            "fp32 Conv2d(3,6,3)-ReLU-flatten-Linear(216,10), input (1,3,8,8); "
            "to_edge_transform_and_lower with XnnpackPartitioner (whole graph delegated); run twice "
            "with the same input"
        ),
        make_model=models.ConvLinear,
        make_inputs=_same_input((1, 3, 8, 8), 2),
        lower=lower_xnnpack,
    ),
    Spec(
        name="pt2e_quant",
        description=(
            "QuantMLP Linear(8,16)-ReLU-Linear(16,16)-sigmoid-Linear(16,4), input (2,8); PT2E int8 "
            "(XNNPACKQuantizer symmetric per-tensor, torchao prepare_pt2e/convert_pt2e, 9 calibration "
            "inputs) lowered with XnnpackPartitioner; reference output from the converted (Q/DQ) module; "
            "run once"
        ),
        make_model=models.QuantMLP,
        make_inputs=_same_input((2, 8), 1),
        lower=lower_quant_xnnpack,
    ),
    Spec(
        name="pt2e_quant_portable",
        description=(
            "same QuantMLP and PT2E int8 quantization as pt2e_quant, NOT delegated: "
            "quantized_decomposed quantize/dequantize ops on the portable + quantized kernels; run once"
        ),
        make_model=models.QuantMLP,
        make_inputs=_same_input((2, 8), 1),
        lower=lower_quant_portable,
    ),
    Spec(
        name="multi_output",
        description=(
            "Conv2d(2,4,3) then multi-output ops max_pool2d(return_indices), topk, var_mean, max.dim, "
            "split plus elementwise ops; two program outputs; input (1,2,6,6); portable kernels "
            "(var_mean kept via EdgeCompileConfig._core_aten_ops_exception_list); run once"
        ),
        make_model=models.MultiOutput,
        make_inputs=_same_input((1, 2, 6, 6), 1),
        lower=lower_var_mean,
    ),
    Spec(
        name="many_runs",
        description=(
            "SmallConvNet Conv2d(1,4,3)-relu-mean-Linear(4,3)-tanh, input (1,1,6,6); portable kernels; "
            "run 20 times with the same input; ETRecord but NO debug buffer (profiling only)"
        ),
        make_model=models.SmallConvNet,
        make_inputs=_same_input((1, 1, 6, 6), 20),
        lower=lower_portable,
        debug_buffer=False,
    ),
    Spec(
        name="no_etrecord",
        description=(
            "SmallConvNet, input (1,1,6,6); portable kernels; run twice with the same input; ETDump and "
            "debug buffer but NO ETRecord"
        ),
        make_model=models.SmallConvNet,
        make_inputs=_same_input((1, 1, 6, 6), 2),
        lower=lower_portable,
        etrecord=False,
    ),
    Spec(
        name="program_outputs_only",
        description=(
            "fp32 MLP Linear(8,16)-ReLU-Linear(16,4), input (2,8), portable kernels; run twice with the "
            "same input by a small C++ runner (scripts/_fixture_runner.cpp, built against the 1.5.1 "
            "wheel's headers and libs) with ETDumpGen debug level kProgramOutputs: the debug buffer "
            "holds program outputs only, no intermediate outputs"
        ),
        make_model=models.MLP,
        make_inputs=_same_input((2, 8), 2),
        lower=lower_portable,
        run_once=rt.cpp_runner("program_outputs"),
    ),
    Spec(
        name="different_inputs",
        description=(
            "fp32 MLP Linear(8,16)-ReLU-Linear(16,4), portable kernels; run twice with DIFFERENT inputs "
            "(2,8) while logging intermediates; ETRecord representative input = first run's input"
        ),
        make_model=models.MLP,
        make_inputs=_different_inputs((2, 8), 2),
        lower=lower_portable,
    ),
    Spec(
        name="attention_view",
        description=(
            "hand-written 2-head self-attention (qkv Linear, chunk, reshape/transpose, bmm, softmax, "
            "transpose+reshape, proj Linear), dim 16, input (1,4,16); portable kernels; run once"
        ),
        make_model=models.TinyAttention,
        make_inputs=_same_input((1, 4, 16), 1),
        lower=lower_portable,
    ),
    Spec(
        name="quantized_mlp",
        description=(
            "bundled example: SplitQuantMLP Linear(8,16)-ReLU-Linear(16,16)-cumsum-Linear(16,4), input "
            "(2,8); PT2E int8 (XNNPACKQuantizer symmetric per-tensor, 9 calibration inputs) lowered with "
            "XnnpackPartitioner: cumsum is not delegated, so two XNNPACK partitions with fp32 cumsum and "
            "quantize/dequantize on the portable + quantized kernels between them; reference output from "
            "the converted (Q/DQ) module; run once"
        ),
        make_model=models.SplitQuantMLP,
        make_inputs=_same_input((2, 8), 1),
        lower=lower_quant_xnnpack,
        out_root=EXAMPLES,
    ),
]


def _seed(name: str) -> int:
    return zlib.crc32(name.encode()) & 0x7FFFFFFF


def _clean(out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    for f in OWNED_FILES:
        (out_dir / f).unlink(missing_ok=True)


def _make_inspector(out_dir: Path, files: dict[str, str | None], **kwargs: Any) -> Any:
    from executorch.devtools import Inspector

    def path(key: str) -> str | None:
        f = files[key]
        return None if f is None else str(out_dir / f)

    return Inspector(
        etdump_path=path("etdump"),
        etrecord=path("etrecord"),
        debug_buffer_path=path("debug_buffer"),
        **kwargs,
    )


def record_expected(spec: Spec, out_dir: Path, files: dict[str, str | None], runs: int) -> dict[str, Any]:
    """Build the reference Inspector on the written files and record its answers."""
    import executorch.devtools.inspector as _insp_pkg  # noqa: F401
    import pandas
    import tabulate

    expected: dict[str, Any] = {
        "generator": {
            "executorch": "1.5.1",
            "torch": torch.__version__,
            "pandas": pandas.__version__,
            "tabulate": getattr(tabulate, "__version__", None),
            "script": "scripts/make_fixtures.py",
        },
        "files": files,
        "model": spec.description,
        "runs": runs,
    }
    try:
        inspector = _make_inspector(out_dir, files)
    except Exception as e:  # noqa: BLE001 - the reference's failure is the answer
        expected["inspector"] = record.error_record(e)
        return expected
    expected["inspector"] = record.record_inspector(inspector)

    if spec.module_hierarchy_view:
        mh = _make_inspector(out_dir, files, enable_module_hierarchy=True)
        expected["inspector_module_hierarchy"] = {
            "event_blocks": record.encode_event_blocks(mh),
            "find_total_for_module": record.find_totals(mh),
        }
    # Recorded for every fixture whose Inspector builds: where the ETRecord or the
    # debug buffer is missing, the entries hold the reference's errors.
    expected["gap"] = record.record_gaps(inspector)
    compare = record.record_compare_results(inspector)
    if compare:
        expected["compare_results"] = compare
    return expected


def build(spec: Spec, out_root: Path | None = None) -> dict[str, Any]:
    out_dir = (out_root or spec.out_root) / spec.name
    torch.manual_seed(_seed(spec.name))
    model = spec.make_model().eval()
    run_inputs = spec.make_inputs()
    lowered = spec.lower(model, run_inputs[0], run_inputs)

    _clean(out_dir)
    files: dict[str, str | None] = {
        "etdump": "etdump.etdp",
        "debug_buffer": "debug_buffer.bin" if spec.debug_buffer else None,
        "etrecord": "etrecord.bin" if spec.etrecord else None,
    }
    if spec.etrecord:
        rt.save_etrecord(lowered, out_dir / "etrecord.bin", run_inputs[0])
    rt.run_with_etdump(
        lowered.buffer, run_inputs, out_dir, debug_buffer=spec.debug_buffer, run_once=spec.run_once
    )

    expected = record_expected(spec, out_dir, files, len(run_inputs))
    with open(out_dir / "expected.json", "w") as f:
        json.dump(expected, f, allow_nan=True, indent=1)
        f.write("\n")
    return expected


def _summary(name: str, expected: dict[str, Any]) -> str:
    insp = expected.get("inspector", {})
    if "error" in insp:
        return f"{name}: Inspector error {insp['error']['type']}: {insp['error']['message'][:100]}"
    blocks = insp.get("event_blocks")
    n_events = sum(len(b["events"]) for b in blocks) if isinstance(blocks, list) else blocks
    gaps = {
        k: (f"{len(v['rows'])} rows" if "rows" in v else v["error"]["type"])
        for k, v in expected.get("gap", {}).items()
    }
    return f"{name}: {n_events} events; gap {gaps}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", default=[], help="fixture name (repeatable)")
    parser.add_argument("--list", action="store_true", help="list fixture names and exit")
    parser.add_argument(
        "--out", type=Path, default=None, help="write <OUT>/<name>/ instead of the repo (for checks)"
    )
    args = parser.parse_args(argv)

    by_name = {s.name: s for s in SPECS}
    if args.list:
        print("\n".join(by_name))
        return 0
    unknown = [n for n in args.only if n not in by_name]
    if unknown:
        print(f"unknown fixture(s) {unknown}; known: {list(by_name)}", file=sys.stderr)
        return 2
    logging.getLogger().setLevel(logging.ERROR)
    warnings.simplefilter("ignore", FutureWarning)
    for spec in SPECS:
        if args.only and spec.name not in args.only:
            continue
        print(f"== {spec.name}", file=sys.stderr)
        expected = build(spec, args.out)
        print(_summary(spec.name, expected), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
