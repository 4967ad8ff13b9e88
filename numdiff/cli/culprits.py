"""Find the op that is wrong by itself: each op replayed on the runtime's own inputs.

For every aligned op (or debug-handle group, or whole delegate) the reference graph's computation
is run on the values the runtime logged for its inputs and compared with the runtime's output
(local error), next to the usual comparison with the AOT run from the start (accumulated error).
A culprit is an op whose local error is beyond its noise (quantization step, float epsilon x
reduction length) while the ops it consumes are fine.

The first line of the table output sums up every view that ran (culprits, broken rows, replay
problems, non-finite values, the first divergent decode step, the culprit inside a delegate).

exit status: 0 no culprit, 1 at least one culprit (in any decode step with --decode-steps), 2 bad arguments,
3 bad or missing input.

example:
  numdiff culprits --etdump model.etdp --etrecord model.etrecord --debug-buffer debug.bin
  numdiff culprits ... --threshold softmax:expected=256 --format json
  numdiff culprits ... --float-program float.etrecord --target-snr 30   (quantization view)
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from numdiff.cli._options import add_artifacts, add_time_scales, add_width, terminal_width
from numdiff.errors import UsageError

if TYPE_CHECKING:
    import pandas as pd

    from numdiff.culprits.report import CulpritReport
    from numdiff.report.text_table import ColumnFit

FORMATS = ("table", "csv", "json")
_SHOWN = ("aot_ops", "runtime_ops", "local_gap", "accumulated_gap", "amplification", "verdict", "is_culprit",
          "input_source", "module_path", "source_line")


def _fit() -> ColumnFit:
    from numdiff.report.text_table import ColumnFit

    return ColumnFit(unwrapped=("method", "local_gap", "accumulated_gap", "amplification", "verdict", "is_culprit"),
                     droppable=("input_source", "amplification", "runtime_ops", "module_path", "source_line"),
                     prose=("source_line", "module_path"))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_artifacts(parser, etrecord_required=True, debug_buffer_required=True)
    add_time_scales(parser)
    g = parser.add_argument_group("comparison")
    g.add_argument("--metric", default="SNR",
                   help="metric of local_gap/accumulated_gap: SNR, MSE, L1, cosine or max_abs (default: SNR)")
    g.add_argument("--reference-graph", default=None, metavar="NAME",
                   help="exported_program, edge_dialect_exported_program or a graph_map name (default: auto)")
    g.add_argument("--threshold", action="append", default=[], metavar="OP:FIELD=VALUE",
                   help="override a verdict limit, in noise units. OP is an op type: the reference graph's op "
                   "without namespace and overload (aten.linear.default -> linear, aten._softmax.default -> "
                   "_softmax; the node linear_1 is a linear), a delegate backend (XnnpackBackend, "
                   "XnnpackBackend/quantized: its delegate calls' rows), or 'default' (every floating-point row without "
                   "its own) or 'quantized' (every quantized row without its own). FIELD is ok, expected or broken "
                   "(the README's Verdicts give the defaults). An OP no compared op has is warned about. "
                   "Repeatable.")
    add_deeper_arguments(parser)
    out = parser.add_argument_group("output")
    out.add_argument("--format", choices=FORMATS, default="table", help="output format (default: table)")
    add_width(out, "the table", "long cells wrap, then columns a person can spare are left out and the table "
              "says which")


def add_deeper_arguments(parser: argparse.ArgumentParser) -> None:
    """The deeper-localization options (quantization view, decode steps, inside delegates)."""
    d = parser.add_argument_group("deeper localization")
    d.add_argument("--inputs-are-representative", action="store_true",
                   help="the run used the ETRecord's representative inputs: judge every op that reads a graph input "
                   "the runtime did not log (by default such an op is not judged when it and every other op reading "
                   "that input are unrelated to their replays: the run may have used other inputs)")
    d.add_argument("--float-program", default=None, metavar="PATH",
                   help="ETRecord or .pt2 archive (torch.export.save) of the float model: adds the quantization view (layers ranked by the error "
                   "their quantization costs, and the layers to keep in higher precision)")
    d.add_argument("--target-snr", type=float, default=None, metavar="DB",
                   help="output SNR the keep-in-higher-precision suggestion aims for (default: 30)")
    d.add_argument("--decode-steps", action="store_true",
                   help="the runs are the decode steps of one generation: first divergent step, its culprit, "
                   "the output gap over the following steps")
    d.add_argument("--step-inputs", default=None, metavar="PATH",
                   help="torch.save file of a list with each run's input tuple (read weights-only): every run is "
                   "judged on its own inputs; for the runs of several decode steps it implies --decode-steps")
    d.add_argument("--taps", default=None, metavar="PATH",
                   help="tap sidecar written at export (numdiff.export_helpers.taps): localize inside delegates "
                   "with the tapped values")
    d.add_argument("--tap-outputs", default=None, metavar="PATH",
                   help="torch.save file of the tapped method's flat outputs (read weights-only); default: the "
                   "program outputs the ETDump logged for the method's first run")


def deeper_options(args: argparse.Namespace) -> dict[str, Any]:
    """``find_culprits`` keyword arguments for the options of :func:`add_deeper_arguments`."""
    from numdiff.analysis.stages import input_options

    options = input_options(args.step_inputs, args.inputs_are_representative)
    if args.float_program is not None:
        options.update(float_program=args.float_program, target_snr_db=args.target_snr)
    elif args.target_snr is not None:
        raise UsageError("--target-snr needs --float-program (it sets the quantization view's target)")
    if args.taps is not None or args.tap_outputs is not None:
        options.update(taps=args.taps, tap_outputs=args.tap_outputs)
    if args.decode_steps:
        options.update(decode_steps=True)
    return options


def parse_thresholds(items: list[str]) -> dict[str, dict[str, float]] | None:
    """``["softmax:expected=256"]`` → ``{"softmax": {"expected": 256.0}}``."""
    out: dict[str, dict[str, float]] = {}
    for item in items:
        op, _, rest = item.partition(":")
        field, _, value = rest.partition("=")
        try:
            number = float(value)
        except ValueError:
            number = float("nan")
        if not op or field not in ("ok", "expected", "broken") or number != number:
            raise UsageError(f"--threshold {item!r} is not OP:FIELD=VALUE\n"
                             "Example: --threshold softmax:expected=256 (FIELD is ok, expected or broken).")
        out.setdefault(op, {})[field] = number
    return out or None


def _warn_unmatched_thresholds(thresholds: dict[str, dict[str, float]] | None, report: CulpritReport) -> None:
    """A warning for each ``--threshold OP`` that no compared op has as its op type (it changed nothing)."""
    import warnings

    present = sorted({r.op_type for r in report.rows})
    backends = {r.delegate.split(" #", 1)[0] for r in report.rows if r.delegate}
    known = {"default", "quantized"} | backends | {f"{b}/quantized" for b in backends}
    for op in sorted(set(thresholds or {}) - known - set(present)):
        what = f"delegate backend {op.split('/')[0]!r}" if op.endswith("/quantized") or op.endswith("Backend") \
            else f"op type {op!r}"
        warnings.warn(f"--threshold {op}: no compared op is of {what}, so it changed nothing; "
                      f"the op types here: {', '.join(present) or 'none'}"
                      + (f"; the delegate backends: {', '.join(sorted(backends))}" if backends else ""), stacklevel=2)


def _cell(value: object) -> str:
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return "CULPRIT" if value else ""
    if isinstance(value, float):
        return "–" if value != value else f"{value:.4g}"  # NaN: no number to show
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return "" if value is None else str(value)


def _ranked_from_1(quant: pd.DataFrame) -> pd.DataFrame:
    """The quantization table as a person reads it: the costliest layer is rank 1 (the library counts from 0)."""
    out = quant.copy()
    out["rank"] = range(1, len(out) + 1)
    return out


def _write_json(report: CulpritReport, df: pd.DataFrame, quant: pd.DataFrame | None) -> None:
    """The report as JSON: numbers as numbers, null where there is none (a NaN amplification, an infinite SNR)."""
    from numdiff.cli._json import write_json

    from numdiff.culprits.report import headline

    data: dict[str, object] = {
        "headline": headline(report), "metric": report.metric, "graph": report.graph_name,
        "first_nonfinite": None if report.first_nonfinite is None else str(report.first_nonfinite),
        "model_nonfinite": None if report.model_nonfinite is None else report.model_nonfinite.as_the_model_computes(),
        "culprits": [r.index for r in report.culprits], "inputs_in_doubt": list(report.inputs_in_doubt),
        "inputs_assumed": list(report.inputs_assumed), "rows": df.to_dict(orient="records")}
    if quant is not None and report.quantization is not None:
        data["quantization"] = {"target_snr_db": report.quantization.target_snr_db,
                                "estimated_snr_db": report.quantization.estimated_snr_db,
                                "suggested_keep": report.quantization.suggested_keep,
                                "layers": quant.to_dict(orient="records")}
    if report.decode is not None:
        first = report.decode.first_divergent_step
        data["decode"] = {"first_divergent_step": None if first is None else first.step,
                          "steps": report.decode.to_dataframe().to_dict(orient="records")}
    if report.inside_delegates is not None:
        data["inside_delegates"] = {"culprits": [r.node for r in report.inside_delegates.culprits],
                                    "rows": report.inside_delegates.to_dataframe().to_dict(orient="records")}
    write_json(data)


def run(args: argparse.Namespace) -> int:
    import pandas as pd
    from tabulate import tabulate

    from numdiff._core.names import abbreviated, counted
    from numdiff._core.terminal import printable, wrapped  # names and messages in the tables come from the files
    from numdiff.inspector import Inspector
    from numdiff.report.text_table import fitted_table, said_once

    width = terminal_width(args.width)
    thresholds = parse_thresholds(args.threshold)
    inspector = Inspector(etdump_path=args.etdump, etrecord=args.etrecord, debug_buffer_path=args.debug_buffer,
                          source_time_scale=args.source_time_scale, target_time_scale=args.target_time_scale)
    options = deeper_options(args)
    report = inspector.find_culprits(args.metric, reference_graph=args.reference_graph, thresholds=thresholds,
                                     **options)
    _warn_unmatched_thresholds(thresholds, report)
    quant = None if report.quantization is None else _ranked_from_1(report.quantization.to_dataframe())
    df = report.to_dataframe()
    if args.format == "table":
        summary = str(report).splitlines()  # the first line sums up every view: it goes first (issue 20, item 6)
        print(printable(summary[0]))
        print()
        if report.first_nonfinite is not None:  # before any metric: NaN/Inf explain the rest
            print(printable(report.first_nonfinite))
            print()
        columns = (["method"] if "method" in df.columns else []) + list(_SHOWN)  # several methods: which one
        table = df[columns].copy()
        table["aot_ops"] = [r.title for r in report.rows]  # a delegate of 200 ops is one line (JSON/CSV: every name)
        table["runtime_ops"] = [counted(r.runtime_ops) for r in report.rows]
        table["module_path"] = [None if r.module_path is None else abbreviated(r.module_path.split(", "), "modules")
                                for r in report.rows]
        for col in ("module_path", "source_line"):  # the ten ops of one source line: its text once
            table[col] = said_once(list(table[col]))
        shown = [[printable(_cell(v), newlines=False) for v in row] for row in table.itertuples(index=False)]
        print(fitted_table(pd.DataFrame(shown, columns=columns), width, _fit()))
        print()
        if quant is not None:
            cols = ["rank", "layer", "snr_db", "keep_in_float", "deployed_node", "note"]
            shown = [[("keep" if v else "") if c == "keep_in_float" else _cell(v) for c, v in zip(cols, row)]
                     for row in quant[cols].itertuples(index=False)]
            print(printable(tabulate(shown, headers=cols, tablefmt="simple", maxcolwidths=40)))
            print()
        if report.inside_delegates is not None:
            tapped = report.inside_delegates.to_dataframe()
            cols = ["node", "module_path", "local_gap", "local_noise_units", "verdict", "is_culprit"]
            print(printable(tabulate([[_cell(v) for v in row] for row in tapped[cols].itertuples(index=False)],
                                     headers=cols, tablefmt="simple", maxcolwidths=40)))
            print()
        if report.decode is not None:
            steps = report.decode.to_dataframe()
            print(printable(tabulate([[_cell(v) if c != "diverges" else ("DIVERGES" if v else "")
                                       for c, v in zip(steps.columns, row)] for row in steps.itertuples(index=False)],
                                     headers=list(steps.columns), tablefmt="simple", maxcolwidths=40)))
            print()
        print(printable("\n".join(part for line in summary[1:] for part in wrapped(line, width))))
    elif args.format == "csv":
        out = df.drop(columns=["stack_traces"]).copy()
        for col in ("aot_ops", "runtime_ops", "replayed_ops"):
            out[col] = [", ".join(v) for v in out[col]]
        out.to_csv(sys.stdout, index=False)
    else:
        _write_json(report, df, quant)
    diverged = report.decode is not None and report.decode.first_divergent_step is not None
    inside = report.inside_delegates is not None and bool(report.inside_delegates.culprits)
    return 1 if report.culprits or diverged or inside else 0
