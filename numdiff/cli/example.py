"""Run the whole pipeline on the bundled example: profiling table, then per-layer SNR.

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


def run(args: argparse.Namespace) -> int:
    import warnings

    from numdiff.examples import example_files
    from numdiff.inspector import Inspector
    from numdiff.report.gap_table import render_gap_table

    files = example_files(EXAMPLE)
    print(f"numdiff example: {EXAMPLE} ({files.etdump.parent})\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the example's notes are shown in the tables below
        inspector = Inspector(etdump_path=files.etdump, etrecord=files.etrecord, debug_buffer_path=files.debug_buffer)
    print("Profiling (ms, one row per runtime event):")
    inspector.print_data_tabular()
    report = inspector.numeric_gap_report(args.metric)
    print(f"\nNumerical gap, reference graph vs runtime ({report.metric} on {report.graph_name}):")
    print(render_gap_table(report.to_dataframe(), report.metric, report.module_paths))
    return 0
