"""Run the whole pipeline on the bundled example: profiling table, then per-layer SNR.

The profiling table is numdiff profile's, fitted to the terminal (--width N to choose);
numdiff profile --full prints the drop-in's wide grid.

The example is a small PT2E-quantized (int8) MLP lowered to two XNNPACK partitions with a
portable op between them, exported and run by ExecuTorch 1.5.1; its ETDump, debug buffer and
ETRecord ship inside the package.

example:
  numdiff example
"""

from __future__ import annotations

import argparse

EXAMPLE = "quantized_mlp"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--metric", default="SNR", help="metric for the gap table (default: SNR)")
    parser.add_argument("--width", type=int, default=None, metavar="N",
                        help="width of the profiling table (default: the terminal's, or $COLUMNS)")


def run(args: argparse.Namespace) -> int:
    import shutil
    import warnings

    from numdiff.errors import UsageError
    from numdiff.examples import example_files
    from numdiff.inspector import Inspector
    from numdiff.report.gap_table import render_gap_table
    from numdiff.report.profile_table import render_profile_table

    if args.width is not None and args.width < 1:
        raise UsageError(f"--width {args.width}: give a positive number of characters")

    files = example_files(EXAMPLE)
    print(f"numdiff example: {EXAMPLE} ({files.etdump.parent})\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the example's notes are shown in the tables below
        inspector = Inspector(etdump_path=files.etdump, etrecord=files.etrecord, debug_buffer_path=files.debug_buffer)
    print("Profiling (one row per runtime event):\n")
    width = args.width or shutil.get_terminal_size((100, 24)).columns
    print(render_profile_table(inspector.to_dataframe(), "ms", width, full=f"numdiff profile --etdump {files.etdump} --full"))
    report = inspector.numeric_gap_report(args.metric)
    print(f"\nNumerical gap, reference graph vs runtime ({report.metric} on {report.graph_name}):")
    print(render_gap_table(report.to_dataframe(), report.metric, report.module_paths))
    return 0
