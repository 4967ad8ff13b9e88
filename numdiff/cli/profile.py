"""Print the profiling table: one row per runtime event, durations across runs.

Same rows and columns as the reference Inspector's print_data_tabular (OPERATOR_CALL rows
and wide columns left out).

example:
  numdiff profile --etdump model.etdp --etrecord model.etrecord --target-time-scale us
"""

from __future__ import annotations

import argparse
import sys

from numdiff.cli._options import add_artifacts, add_time_scales


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_artifacts(parser)
    add_time_scales(parser)
    parser.add_argument("--tsv", metavar="PATH", help="also write the table as tab-separated values to PATH")


def run(args: argparse.Namespace) -> int:
    from numdiff.inspector import Inspector

    inspector = Inspector(etdump_path=args.etdump, etrecord=args.etrecord, debug_buffer_path=args.debug_buffer,
                          source_time_scale=args.source_time_scale, target_time_scale=args.target_time_scale)
    inspector.print_data_tabular(file=sys.stdout)
    if args.tsv:
        with open(args.tsv, "w", encoding="utf-8", newline="") as f:
            inspector.save_data_to_tsv(f)
    return 0
