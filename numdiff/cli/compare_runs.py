"""Runs of one program against each other: where two devices, backends or builds part ways.

Each --run is one run of the same .pte (an ETDump with its debug buffer, and for decode runs the
step inputs), all under the program's ETRecord. The runs are aligned op by op; per op the table
shows how the run agrees with the base run (identical; within-noise: within --tolerance, or each
run's op within its own noise of the reference on its inputs; diverges: the op where they part;
inherits: beyond noise because an input already was), the fit of the run against the
base (scale, offset, R²), and which side departs from the reference there (each op replayed on
that run's own inputs). A difference a fit explains is said in words ("outputs are 0.50× the
base's (half), R² 1.00"). Decode runs (--decode-steps, or step inputs) add the tokens per step.

exit status: 0 every run agrees with the base within noise, 1 a run diverges from the base, 2 bad
arguments, 3 bad or missing input (runs of different programs included).

example:
  numdiff compare-runs --etrecord model.etrecord --run laptop=laptop.etdp,laptop.bin --run phone=phone.etdp,phone.bin
  numdiff compare-runs ... --base phone --format json
  numdiff compare-runs --etrecord r.bin --run a=a.etdp,a.bin,a_steps.pt --run b=b.etdp,b.bin,b_steps.pt
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from numdiff._core.terminal import wrapped
from numdiff.cli._options import add_width, terminal_width
from numdiff.cli.culprits import parse_thresholds
from numdiff.errors import UsageError

if TYPE_CHECKING:
    from numdiff.runs_compare import RunFiles, RunsComparison

FORMATS = ("table", "json")
_OP_COLUMNS = ("aot_ops", "module", "verdict", "gap_vs_base", "rel_diff", "scale", "offset", "r2", "run_local",
               "base_local", "departs")
_TOKEN_COLUMNS = ("step", "token", "base_token", "reference_token", "margin", "topk_agreement", "kl_vs_reference",
                  "tensors_diverge")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("artifacts")
    g.add_argument("--etrecord", required=True, metavar="PATH", help="ETRecord of the program every run ran")
    g.add_argument("--run", action="append", default=[], required=True, metavar="NAME=ETDUMP[,DEBUG_BUFFER[,STEPS]]",
                   help="one run: its name, ETDump, debug buffer and (decode runs) a torch.save file of each "
                   "step's input tuple. Repeat, at least twice.")
    c = parser.add_argument_group("comparison")
    c.add_argument("--base", default=None, metavar="NAME", help="the run the others are compared with (default: the first)")
    c.add_argument("--metric", default="SNR",
                   help="metric of gap_vs_base and of each run's replay: SNR, MSE, L1, cosine, max_abs, KL, topk, "
                   "median_ratio (default: SNR)")
    c.add_argument("--tolerance", type=float, default=None, metavar="REL",
                   help="relative rms difference within which floating-point values agree (default: 1e-4 for "
                   "float32, 1e-2 for float16/bfloat16; integers: one step)")
    c.add_argument("--reference-graph", default=None, metavar="NAME",
                   help="exported_program, edge_dialect_exported_program or a graph_map name (default: auto)")
    c.add_argument("--threshold", action="append", default=[], metavar="OP:FIELD=VALUE",
                   help="override a local verdict limit in noise units, as in numdiff culprits. Repeatable.")
    c.add_argument("--decode-steps", action="store_true",
                   help="the runs of each ETDump are the steps of one generation: compare tokens step by step")
    c.add_argument("--top-k", type=int, default=5, metavar="K", help="k of the tokens' top-k agreement (default: 5)")
    out = parser.add_argument_group("output")
    out.add_argument("--format", choices=FORMATS, default="table", help="output format (default: table)")
    add_width(out, "the tables and sentences", "the fit's offset, R² and scale columns give way first")


def parse_run(item: str) -> tuple[str, RunFiles]:
    """``"phone=phone.etdp,phone.bin"`` → ``("phone", RunFiles("phone.etdp", "phone.bin"))``."""
    from numdiff.runs_compare import RunFiles

    name, sep, rest = item.partition("=")
    paths = [p for p in rest.split(",")] if sep else []
    if not name.strip() or not paths or not paths[0] or len(paths) > 3 or any(not p for p in paths):
        raise UsageError(f"--run {item!r} is not NAME=ETDUMP[,DEBUG_BUFFER[,STEP_INPUTS]]\n"
                         "Example: --run phone=phone.etdp,phone_debug.bin")
    items = paths + [None] * (3 - len(paths))
    return name.strip(), RunFiles(items[0], items[1], items[2])  # type: ignore[arg-type]


def _runs(items: list[str]) -> dict[str, RunFiles]:
    runs: dict[str, RunFiles] = {}
    for item in items:
        name, files = parse_run(item)
        if name in runs:
            raise UsageError(f"--run {name!r} is given twice\nGive each run its own name.")
        runs[name] = files
    if len(runs) < 2:
        raise UsageError(f"compare-runs needs at least two --run, got {len(runs)}\n"
                         "Example: --run laptop=laptop.etdp,laptop.bin --run phone=phone.etdp,phone.bin")
    return runs


def _cell(value: object) -> str:
    if isinstance(value, float):
        return "–" if value != value else f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    if hasattr(value, "value"):
        return str(value.value)
    return "" if value is None else str(value)


def render_table(result: RunsComparison, width: int = 100) -> str:
    """The comparison as text ``width`` characters wide: the summary, then one op table per run (and its
    tokens). Long sentences wrap; the op table gives way as numdiff gap's does (the fit's scale, offset and
    R² are left out first: the sentences under the tables put the fit in words)."""
    import pandas as pd
    from tabulate import tabulate

    from numdiff.report.text_table import ColumnFit, fitted_table

    fit = ColumnFit(unwrapped=("verdict", "gap_vs_base", "rel_diff", "scale", "offset", "r2", "run_local",
                               "base_local", "departs"),
                    droppable=("offset", "r2", "scale", "module"), prose=("module",), elsewhere="--format json")
    lines = str(result).splitlines()
    out = [*wrapped(lines[0], width), ""]
    for run in result.runs.values():
        out.extend(wrapped(f"run {run.name!r} against base {result.base!r}", width))
        rows = [[_cell(v) for v in (op.aot_ops, op.module_path, op.verdict, op.gap_vs_base, op.rel_diff,
                                    op.fit.scale, op.fit.offset, op.fit.r2, op.run_local, op.base_local,
                                    op.departs)] for op in run.ops]
        if rows:
            out.append(fitted_table(pd.DataFrame(rows, columns=list(_OP_COLUMNS)), width, fit))
        if run.tokens is not None:
            out.append("")
            out.append(tabulate([[_cell(getattr(s, c)) if c != "tensors_diverge" else ("DIVERGE" if s.tensors_diverge
                                                                                      else "")
                                  for c in _TOKEN_COLUMNS] for s in run.tokens.steps],
                                headers=list(_TOKEN_COLUMNS), tablefmt="simple"))
        out.append("")
    for line in lines[1:]:
        out.extend(wrapped(line, width))
    return "\n".join(out)


def run(args: argparse.Namespace) -> int:
    from numdiff._core.terminal import printable  # names and messages come from the files
    from numdiff.cli._json import write_json
    from numdiff.runs_compare import compare_runs

    runs = _runs(args.run)
    if args.top_k < 1:
        raise UsageError(f"--top-k must be at least 1, got {args.top_k}\nExample: --top-k 5")
    result = compare_runs(args.etrecord, runs, base=args.base, distance=args.metric, tolerance=args.tolerance,
                          reference_graph=args.reference_graph, thresholds=parse_thresholds(args.threshold),
                          decode_steps=args.decode_steps or None, top_k=args.top_k)
    if args.format == "json":
        write_json(result.to_json())
    else:
        print(printable(render_table(result, terminal_width(args.width))))
    return 1 if result.diverges else 0
