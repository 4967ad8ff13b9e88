"""Per-model table: numdiff vs ExecuTorch 1.5.1's Inspector on the realistic fixtures (issue 8 item 10).

Usage::

    python3 benchmarks/realistic.py [--oracle-python PATH] [--numdiff-python PATH] [--repeat 3]
                                    [--threads 1] [--only NAME ...] [--markdown OUT.md]

For every model under ``tests/fixtures/realistic/`` (artifacts written by ExecuTorch 1.5.1) and
every other fixture with an ETDump, an ETRecord and a debug buffer, each side runs ``--repeat``
times, interleaved, each in a fresh process: ``import torch`` first, then the side's
``Inspector`` import, ``Inspector(...)`` and ``calculate_numeric_gap("SNR")``. Printed per model:
the median end-to-end time after ``import torch`` (import + construct + gap), the median time
after all imports (construct + gap), the two speedups, and whether numdiff's process imported
``torch._dynamo``. Import rule for "after imports": each side imports, before that timer, the
modules its run uses: the reference via ``import executorch.devtools``; numdiff, whose modules
load lazily, via ``numdiff`` plus ``numdiff.inspector, .gap, .schema.etrecord, .program._build,
.program.loader, .program._builder, .program._edge_ops, .program.pickles, .program.runnable, .capture,
.capture._aten_builder, .align, .comparators, ._core.gc_pause`` and ``torch.ao.quantization.fx._decomposed`` (the quantized-op definitions, which
``executorch.devtools`` also loads at import). These imports still count in end to end. Where the reference raises, its time up to the error is shown and marked,
and the model is run again on both sides with ``reference_graph="edge_dialect_exported_program"`` (a
like-for-like row, when the reference can compare that graph); the "after imports" minimum is taken over
the rows where the reference answers.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
FIXTURES = REPO / "tests" / "fixtures"
EDGE = "edge_dialect_exported_program"
DEFAULT_ORACLE = Path(os.environ.get("ORACLE_VENV", Path.home() / ".cache" / "numdiff-oracle")) / "bin" / "python"

_CHILD = r"""
import json, sys, time, warnings, logging
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
side, etdump, etrecord, buffer = sys.argv[1:5]
graph = sys.argv[5] if len(sys.argv) > 5 and sys.argv[5] else None
warnings.simplefilter("ignore")
logging.disable(logging.WARNING)
if side == "numdiff":
    from numdiff import Inspector
    # Like for like: numdiff imports its modules lazily, the reference's `import executorch.devtools`
    # loads everything its run uses; so numdiff's modules the run uses are imported before the timer.
    import numdiff.inspector, numdiff.gap, numdiff.schema.etrecord, numdiff.program._build  # noqa: F401
    import numdiff.capture, numdiff.capture._aten_builder, numdiff.align, numdiff.comparators  # noqa: F401
    import numdiff.program.loader, numdiff.program._builder, numdiff.program._edge_ops  # noqa: F401
    import numdiff.program.pickles, numdiff.program.runnable, numdiff._core.gc_pause  # noqa: F401
    import torch.ao.quantization.fx._decomposed  # noqa: F401  (quantized ops; executorch.devtools loads it too)
else:
    from executorch.devtools import Inspector
t2 = time.perf_counter()
error = None
try:
    inspector = Inspector(etdump_path=etdump, etrecord=etrecord, debug_buffer_path=buffer or None)
    inspector.calculate_numeric_gap("SNR", reference_graph=graph)
except Exception as e:
    error = f"{type(e).__name__}: {str(e)[:120]}"
t3 = time.perf_counter()
print(json.dumps({"torch_import": t1 - t0, "end_to_end": t3 - t1, "after_imports": t3 - t2,
                  "error": error, "dynamo": "torch._dynamo" in sys.modules}))
"""


def cases() -> list[tuple[str, Path, Path, Path | None]]:
    """``(name, etdump, etrecord, debug buffer)`` for every model with all three artifacts."""
    found = []
    realistic = FIXTURES / "realistic"
    for folder in sorted(realistic.iterdir()) if realistic.is_dir() else []:
        expected = folder / "expected.json.gz"
        if not expected.is_file():
            continue
        files = json.loads(gzip.decompress(expected.read_bytes())).get("files", {})
        if files.get("etdump") and files.get("etrecord"):
            buffer = folder / files["debug_buffer"] if files.get("debug_buffer") else None
            found.append((folder.name, folder / files["etdump"], folder / files["etrecord"], buffer))
    for folder in sorted(FIXTURES.iterdir()):
        parts = [folder / "etdump.etdp", folder / "etrecord.bin", folder / "debug_buffer.bin"]
        if folder.name != "realistic" and all(p.is_file() for p in parts):
            found.append((folder.name, *parts))
    return found


def run_once(python: Path, side: str, case: tuple[str, Path, Path, Path | None], threads: int,
             graph: str | None = None) -> dict[str, Any]:
    _, etdump, etrecord, buffer = case
    for path in (etdump, etrecord, buffer):  # warm page cache for both sides alike
        if path is not None:
            path.read_bytes()
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONWARNINGS="ignore")
    if threads:
        env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    result = subprocess.run(
        [str(python), "-c", _CHILD, side, str(etdump), str(etrecord), str(buffer or ""), graph or ""],
        capture_output=True, text=True, env=env, cwd=str(REPO), timeout=900,
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    if result.returncode != 0 or not lines:
        raise RuntimeError(f"{side} on {case[0]} failed:\n{result.stderr[-2000:]}")
    return dict(json.loads(lines[-1]))


def _median(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def table(results: dict[str, dict[str, list[dict[str, Any]]]]) -> list[str]:
    head = ("| model | numdiff end to end (s) | reference end to end (s) | speedup | numdiff after imports (s) "
            "| reference after imports (s) | speedup after imports | numdiff imported torch._dynamo |")
    lines = [head, "|" + "---|" * 8]
    for name, sides in results.items():
        nd, ref = sides["numdiff"], sides["oracle"]
        ref_error = next((r["error"] for r in ref if r["error"]), None)
        mark = " (reference raised)" if ref_error else ""
        e2e = _median(ref, "end_to_end") / _median(nd, "end_to_end")
        after = _median(ref, "after_imports") / _median(nd, "after_imports")
        lines.append(
            f"| {name} | {_median(nd, 'end_to_end'):.3f} | {_median(ref, 'end_to_end'):.3f}{mark} | {e2e:.1f}× "
            f"| {_median(nd, 'after_imports'):.3f} | {_median(ref, 'after_imports'):.3f} | {after:.1f}× "
            f"| {'yes' if any(r['dynamo'] for r in nd) else 'no'} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--oracle-python", type=Path, default=DEFAULT_ORACLE)
    parser.add_argument("--numdiff-python", type=Path, default=REPO / ".venv" / "bin" / "python")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads on both sides (0 = library default)")
    parser.add_argument("--only", nargs="*", help="model names to run (default: all)")
    parser.add_argument("--markdown", type=Path, help="also write the table to this file")
    args = parser.parse_args(argv)
    if not args.oracle_python.is_file():
        print(f"oracle python {args.oracle_python} not found (make it as benchmarks/run.py does)", file=sys.stderr)
        return 2
    selected = [c for c in cases() if not args.only or c[0] in args.only]
    results: dict[str, dict[str, list[dict[str, Any]]]] = {}
    started = time.time()
    for case in selected:
        runs: dict[str, list[dict[str, Any]]] = {"numdiff": [], "oracle": []}
        for _ in range(args.repeat):
            for side, python in (("numdiff", args.numdiff_python), ("oracle", args.oracle_python)):
                runs[side].append(run_once(python, side, case, args.threads))
        results[case[0]] = runs
        print(table({case[0]: runs})[-1], flush=True)
        if any(r["error"] for r in runs["oracle"]):  # like for like: the graph the reference can compare
            edge: dict[str, list[dict[str, Any]]] = {"numdiff": [], "oracle": []}
            for _ in range(args.repeat):
                for side, python in (("numdiff", args.numdiff_python), ("oracle", args.oracle_python)):
                    edge[side].append(run_once(python, side, case, args.threads, EDGE))
            if not any(r["error"] for r in edge["oracle"]):
                results[f"{case[0]} ({EDGE})"] = edge
                print(table({f"{case[0]} ({EDGE})": edge})[-1], flush=True)
    lines = table(results)
    e2e = [_median(s["oracle"], "end_to_end") / _median(s["numdiff"], "end_to_end") for s in results.values()]
    # "After imports" compares like with like: rows where the reference raised (it stops at its first
    # error while numdiff does the whole comparison) are shown but left out of the minimum; their
    # like-for-like row (the Edge graph, which the reference can compare) is in.
    comparable = {n: s for n, s in results.items() if not any(r["error"] for r in s["oracle"])}
    after = [_median(s["oracle"], "after_imports") / _median(s["numdiff"], "after_imports")
             for s in comparable.values()]
    skipped = sorted(set(results) - set(comparable))
    summary = (f"Import rule: before the 'after imports' timer the reference imports executorch.devtools and "
               f"numdiff imports numdiff and the numdiff modules its run uses (numdiff.inspector, .gap, .schema.*, "
               f".capture.*, .align, .comparators) plus torch.ao.quantization.fx._decomposed (executorch.devtools "
               f"loads it too); both count in end to end. "
               f"{len(results)} models, {args.repeat} runs per side, {args.threads or 'default'} thread(s), "
               f"load {os.getloadavg()[0]:.2f}, {time.time() - started:.0f} s. Lowest speedup end to end "
               f"{min(e2e):.1f}× (target ≥ 3×: {'PASS' if min(e2e) >= 3 else 'FAIL'}); lowest after imports "
               f"{min(after):.1f}× over the {len(comparable)} rows where the reference answers (target ≥ 1×: "
               f"{'PASS' if min(after) >= 1 else 'FAIL'}; rows where it raised, left out: {', '.join(skipped) or 'none'}).")
    print("\n".join(["", *lines, "", summary]))
    if args.markdown:
        args.markdown.write_text("\n".join([*lines, "", summary]) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
