"""Compare every intermediate output of the reference graph with what the runtime logged.

One row per layer (debug handle): the reference graph's op, the runtime's op, and the gap
under the chosen metric. Table format shows the model's own source line for each layer, fitted
to the terminal's width (--width N to choose: long cells are wrapped).
JSON: numbers as numbers, null where there is none (an identical layer's infinite SNR, a NaN);
tensors as their dtype and shape.

example:
  numdiff gap --etdump model.etdp --etrecord model.etrecord --debug-buffer debug.bin --metric SNR
"""

from __future__ import annotations

import argparse
import sys

from numdiff.cli._options import add_artifacts, add_time_scales, add_width, terminal_width

FORMATS = ("table", "csv", "json")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_artifacts(parser, etrecord_required=True, debug_buffer_required=True)
    add_time_scales(parser)
    g = parser.add_argument_group("comparison")
    g.add_argument("--metric", default="SNR",
                   help="SNR, MSE, L1, cosine or max_abs (case-insensitive; default: SNR)")
    g.add_argument("--reference-graph", default=None, metavar="NAME",
                   help="exported_program, edge_dialect_exported_program or a graph_map name "
                   "(default: ATen when debug handles back-propagate, else Edge)")
    g.add_argument("--disable-debug-handle-validation", action="store_true",
                   help="use the ATen graph even when some Edge ops have no ATen counterpart")
    g.add_argument("--drop-in", action="store_true",
                   help="the reference's rows and columns only: multi-output ops and unmatched rows are left "
                   "out, and there is no module column (calculate_numeric_gap has none)")
    out = parser.add_argument_group("output")
    out.add_argument("--format", choices=FORMATS, default="table", help="output format (default: table)")
    add_width(out, "the table", "long cells wrap, then the handle, shape and module columns are left out")


def run(args: argparse.Namespace) -> int:
    from numdiff.inspector import Inspector
    from numdiff.report.gap_table import gap_summary, render_gap_table

    width = terminal_width(args.width)
    inspector = Inspector(etdump_path=args.etdump, etrecord=args.etrecord, debug_buffer_path=args.debug_buffer,
                          source_time_scale=args.source_time_scale, target_time_scale=args.target_time_scale)
    modules: dict[str, str] | None = None  # the drop-in's rows have no module column, as the reference's
    if args.drop_in:
        df = inspector.calculate_numeric_gap(args.metric, reference_graph=args.reference_graph,
                                             disable_debug_handle_validation=args.disable_debug_handle_validation)
        metric = args.metric
    else:
        report = inspector.numeric_gap_report(args.metric, reference_graph=args.reference_graph,
                                              disable_debug_handle_validation=args.disable_debug_handle_validation)
        df, metric, modules = report.to_dataframe(), f"{report.metric} on {report.graph_name}", report.module_paths
    if args.format == "table":
        print(render_gap_table(df, metric, modules, width=width))
    elif args.format == "csv":
        gap_summary(df, modules).to_csv(sys.stdout, index=False)
    else:
        from numdiff.cli._json import write_json

        write_json({"metric": metric, "rows": df.to_dict(orient="records")})
    return 0
