"""Write a timeline of the run for Perfetto (ui.perfetto.dev) or chrome://tracing.

Trace Event format (JSON object): one track per run of each method, every profiled event a
slice at the time the runtime logged it, delegate-internal ops nested under their
DELEGATE_CALL, and each op's numerical error (SNR, MSE, matched reference ops, source line)
in its slice's arguments and on an "SNR dB" counter track. Reads a saved analysis or the
artifacts (the same flags as numdiff analyze).

examples:
  numdiff trace run.json -o trace.json
  numdiff trace --etdump model.etdp --etrecord model.etrecord --debug-buffer debug.bin -o trace.json
"""

from __future__ import annotations

import argparse

from numdiff.cli._console import note
from numdiff.cli.report import add_analysis_input, load_or_analyse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_analysis_input(parser)
    parser.add_argument("-o", "--output", required=True, metavar="PATH", help="trace file to write (JSON)")


def run(args: argparse.Namespace) -> int:
    from numdiff.report import Analysis
    from numdiff.report.trace import trace_events, write_trace

    analysis = load_or_analyse(args)
    assert isinstance(analysis, Analysis)
    write_trace(analysis, args.output)
    n = sum(1 for e in trace_events(analysis)["traceEvents"] if e["ph"] == "X")
    note(f"wrote {args.output}: {n} slices; open it in ui.perfetto.dev or chrome://tracing")
    return 0
