"""Run the whole pipeline on the bundled example: profiling table, then per-layer SNR.

Every part is fitted to the terminal's width (--width N to choose): the profiling table is
numdiff profile's, the gap table numdiff gap's; numdiff profile --full prints the drop-in's wide grid.

The example is a small PT2E-quantized (int8) MLP lowered to two XNNPACK partitions with a
portable op between them, exported and run by ExecuTorch 1.5.1; its ETDump, debug buffer and
ETRecord ship inside the package.

example:
  numdiff example
"""

from __future__ import annotations

import argparse

from numdiff.cli._options import add_width, terminal_width

EXAMPLE = "quantized_mlp"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--metric", default="SNR", help="metric for the gap table (default: SNR)")
    add_width(parser, "every part of the output")


def run(args: argparse.Namespace) -> int:
    import textwrap
    import warnings

    from numdiff.examples import example_files
    from numdiff.inspector import Inspector
    from numdiff.report.gap_table import render_gap_table
    from numdiff.report.profile_table import render_profile_table

    width = terminal_width(args.width)

    def say(text: str) -> None:
        print("\n".join(textwrap.wrap(text, max(width, 20), break_on_hyphens=False, break_long_words=False)))

    files = example_files(EXAMPLE)
    say(f"numdiff example: {EXAMPLE} ({files.etdump.parent})")
    print()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the example's notes are shown in the tables below
        inspector = Inspector(etdump_path=files.etdump, etrecord=files.etrecord, debug_buffer_path=files.debug_buffer)
    say("Profiling (one row per runtime event):")
    print()
    print(render_profile_table(inspector.to_dataframe(), "ms", width, full=f"numdiff profile --etdump {files.etdump} --full"))
    report = inspector.numeric_gap_report(args.metric)
    print()
    say("Numerical gap, reference graph vs runtime:")
    print(render_gap_table(report.to_dataframe(), f"{report.metric} on {report.graph_name}", report.module_paths,
                           width=width))
    return 0
