"""Write a small sample of an older ExecuTorch release's artifacts, with that release's own answers.

Dev script, never run by CI. Run it with the python of a virtualenv holding that release (one venv
per release; older wheels need older torch: ExecuTorch 1.0.1 takes torch 2.9, 0.7.0 torch 2.8)::

    python3 -m venv /root/.cache/numdiff-release-1.0.1
    /root/.cache/numdiff-release-1.0.1/bin/pip install executorch==1.0.1
    /root/.cache/numdiff-release-1.0.1/bin/python scripts/make_release_fixtures.py
    /root/.cache/numdiff-release-0.7.0/bin/python scripts/make_release_fixtures.py     # same for 0.7.0

It writes ``tests/fixtures/releases/<version>/``: ``etrecord.bin`` exported by that release from a
fixed-seed MLP (Linear(8,16)-ReLU-Linear(16,4), input (2,8), portable kernels), with one
representative input and its reference output (1.0.x: ``generate_etrecord=True`` and
``update_representative_inputs``; 0.7: a ``BundledProgram`` given to ``generate_etrecord``, its only
way to record inputs), ``model.pte``, and ``etdump.etdp`` + ``debug_buffer.bin`` from running the
program 2 times. The run uses the release's own Python bindings when they write an ETDump,
otherwise the ExecuTorch 1.5.1 runtime of the oracle virtualenv (``--runtime``; the ETDump schema is
the same from 0.7.0 to 1.5.1). Finally that release's ``Inspector`` is built on the written files
and its answers are stored in ``expected.json``: per block the events' names, op types, debug
handles, perf sample counts and debug data; and ``calculate_numeric_gap`` for MSE, L1 and SNR (or
the error it raised). ``tests/schema/test_releases.py`` compares numdiff with them.

With ``--pt2-only`` it writes ``tests/fixtures/releases/torch-<torch version>/model.pt2`` instead
(``torch.export.save`` of the MLP plus a split) and the nodes, inputs and outputs that torch's own
``torch.export.load`` gives (``tests/schema/test_releases.py`` reads it with ``numdiff``'s loader).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parent.parent
ORACLE_PYTHON = "/root/.cache/numdiff-oracle/bin/python"
DEBUG_BUFFER_SIZE = 8 * 1024  # the runtime writes all of it; the MLP logs about 2.5 KiB in two runs
RUNS = 2


class _MLP(torch.nn.Module):
    """Sequential's layers behind a ``forward(x)``: Sequential's own argument is named ``input``, a builtin's
    name, which numdiff's program guard renames (tests/security requires fixtures to need no renaming)."""

    def __init__(self, layers: torch.nn.Sequential) -> None:
        super().__init__()
        self.layers = layers

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.layers(x)
        return out


def _model() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    layers = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    return _MLP(layers).eval(), (torch.randn(2, 8),)


def _version() -> str:
    from importlib.metadata import version

    return version("executorch")


def export(out: Path) -> None:
    """Export, lower and write model.pte and etrecord.bin the way this release does it."""
    from executorch.exir import to_edge

    model, inputs = _model()
    with torch.no_grad():
        expected = model(*inputs)
    ep = torch.export.export(model, inputs)
    release = _version()
    if release.startswith("0."):
        from executorch.devtools import BundledProgram, generate_etrecord
        from executorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite

        edge = to_edge(ep)
        edge_copy = copy.deepcopy(edge)
        program = edge.to_executorch()
        suite = MethodTestSuite(method_name="forward", test_cases=[
            MethodTestCase(inputs=list(inputs), expected_outputs=[expected])])
        bundled = BundledProgram(program, [suite])
        generate_etrecord(str(out / "etrecord.bin"), edge_copy, bundled)
        (out / "model.pte").write_bytes(program.buffer)
    else:
        edge = to_edge(ep, generate_etrecord=True)
        program = edge.to_executorch()
        record = program.get_etrecord()
        record.update_representative_inputs([inputs])
        record.update_reference_outputs([[expected]])
        record.save(str(out / "etrecord.bin"))
        (out / "model.pte").write_bytes(program.buffer)


_RUN = """
import json, sys, torch
from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer
class MLP(torch.nn.Module):  # make_release_fixtures._MLP
    def __init__(self, layers):
        super().__init__()
        self.layers = layers
    def forward(self, x):
        return self.layers(x)
torch.manual_seed(0)
model = MLP(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))).eval()
inputs = (torch.randn(2, 8),)
out, size, runs, reexport = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
program = open(out + '/model.pte', 'rb').read()
if reexport:  # this runtime cannot load the release's program: export the same model again, check the maps agree
    from executorch.exir import to_edge
    lowered = to_edge(torch.export.export(model, inputs)).to_executorch()
    program = lowered.buffer
    print(json.dumps(lowered.debug_handle_map))
m = _load_for_executorch_from_buffer(program, enable_etdump=True, debug_buffer_size=size)
for _ in range(runs):
    m.run_method('forward', inputs)
m.write_etdump_result_to_file(out + '/etdump.etdp', out + '/debug_buffer.bin')
"""


def run(out: Path, runtime: str) -> str:
    """Run the program RUNS times; return which runtime wrote the ETDump (and how)."""
    import zipfile

    with zipfile.ZipFile(out / "etrecord.bin") as record:
        handles = json.loads(record.read("debug_handle_map"))
    attempts = ((sys.executable, f"ExecuTorch {_version()}", "0"),
                (runtime, "ExecuTorch 1.5.1 (oracle) running model.pte", "0"),
                (runtime, "ExecuTorch 1.5.1 (oracle) running the same model exported again by 1.5.1 "
                          "(its debug_handle_map equal to the release's ETRecord's)", "1"))
    for python, name, reexport in attempts:
        done = subprocess.run([python, "-c", _RUN, str(out), str(DEBUG_BUFFER_SIZE), str(RUNS), reexport],
                              capture_output=True, text=True)
        if done.returncode == 0 and (out / "etdump.etdp").is_file() and (out / "etdump.etdp").stat().st_size:
            if reexport == "1":
                again = json.loads(done.stdout.strip().splitlines()[-1])
                if again != handles:
                    raise SystemExit(f"1.5.1's debug_handle_map {again} differs from the release's {handles}")
            return name
        print(f"{name}: no ETDump: {done.stderr.strip().splitlines()[-1:]}")
    raise SystemExit("no runtime wrote an ETDump")


def _plain(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return {"dtype": str(value.dtype), "shape": list(value.shape),
                "values": value.detach().to(torch.float64).flatten().tolist()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, float) and value != value:
        return "nan"
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return str(value)
    return value


def answers(out: Path) -> dict[str, Any]:
    """This release's Inspector on the written files."""
    from executorch.devtools import Inspector

    result: dict[str, Any] = {}
    try:
        insp = Inspector(etdump_path=str(out / "etdump.etdp"), etrecord=str(out / "etrecord.bin"),
                         debug_buffer_path=str(out / "debug_buffer.bin"))
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc(limit=3)}
    result["blocks"] = [{
        "name": block.name,
        "events": [{"name": ev.name, "op_types": list(ev.op_types or []),
                    "debug_handles": _plain(ev.debug_handles), "samples": len(ev.perf_data.raw) if ev.perf_data else 0,
                    "is_delegated_op": ev.is_delegated_op,
                    "debug_data": _plain(list(ev.debug_data or []))} for ev in block.events],
    } for block in insp.event_blocks]
    gap: dict[str, Any] = {}
    for metric in ("MSE", "L1", "SNR"):
        try:
            df = insp.calculate_numeric_gap(metric)
        except Exception as e:
            gap[metric] = {"error": f"{type(e).__name__}: {e}"}
            continue
        gap[metric] = {"aot_ops": [list(x) for x in df["aot_ops"]], "runtime_ops": [list(x) for x in df["runtime_ops"]],
                       "gap": _plain([list(g) if isinstance(g, (list, tuple)) else g for g in df["gap"]])}
    result["gap"] = gap
    return result


class _Pt2Model(torch.nn.Module):
    """The MLP plus a multi-output op (split), whose nodes get generated names."""

    def __init__(self) -> None:
        super().__init__()
        self.mlp, _ = _model()

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        a, b = torch.split(self.mlp(x), 2, dim=1)
        return torch.relu(a), b * 2


def write_pt2(root: Path) -> Path:
    """``torch-<version>/model.pt2`` written by this torch's torch.export.save, and the node names its own
    torch.export.load gives (``expected.json``)."""
    out = root / f"torch-{torch.__version__.split('+')[0]}"
    out.mkdir(parents=True, exist_ok=True)
    _, inputs = _model()
    ep = torch.export.export(_Pt2Model().eval(), inputs)
    torch.export.save(ep, str(out / "model.pt2"))
    loaded = torch.export.load(str(out / "model.pt2"))
    with torch.no_grad():
        outputs = loaded.module()(*inputs)
    expected = {
        "generator": f"scripts/make_release_fixtures.py with torch {torch.__version__}",
        "nodes": [[n.op, n.name, str(n.target)] for n in loaded.graph.nodes],
        "inputs": _plain(list(inputs)),
        "outputs": _plain(list(outputs)),
    }
    (out / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime", default=ORACLE_PYTHON, help="python of ExecuTorch 1.5.1, used when this "
                        "release's bindings write no ETDump. Defaults to the oracle virtualenv's.")
    parser.add_argument("--out", type=Path, default=None, help="Defaults to tests/fixtures/releases/<version>.")
    parser.add_argument("--pt2-only", action="store_true", help="only write torch-<version>/model.pt2")
    args = parser.parse_args()
    if args.pt2_only:
        print(f"wrote {write_pt2(REPO / 'tests' / 'fixtures' / 'releases')}")
        return
    # the release's exporter runs `flatc` from PATH; the wheel installs it beside this python
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    release = _version()
    out = args.out or REPO / "tests" / "fixtures" / "releases" / release
    out.mkdir(parents=True, exist_ok=True)
    for name in ("etdump.etdp", "debug_buffer.bin"):
        (out / name).unlink(missing_ok=True)
    export(out)
    runtime = run(out, args.runtime)
    expected = {
        "generator": f"scripts/make_release_fixtures.py with ExecuTorch {release}, torch {torch.__version__}",
        "release": release,
        "etdump_written_by": runtime,
        "model": "Sequential(Linear(8,16), ReLU, Linear(16,4)) behind forward(x), seed 0, input randn(2,8), portable kernels",
        "runs": RUNS,
        "inspector": answers(out),
    }
    (out / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    print(f"wrote {out} (ETDump by {runtime})")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory():
        main()
