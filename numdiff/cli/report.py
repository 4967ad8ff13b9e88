"""Write the HTML report: one self-contained file that opens offline in any browser.

From a saved analysis (numdiff analyze ... -o run.json) or straight from the artifacts (the
same flags as numdiff analyze). The page shows the worst layers (and culprits, when culprit
localization is available) with their source lines, SNR along execution order with the noise
floor, latency per event and per module, a sortable and filterable table of every compared
layer with how it was matched, and per-layer details (error histogram, tensor statistics,
stack trace). No network access: charts, script, styles and data are inside the file.

examples:
  numdiff report run.json -o report.html
  numdiff report --etdump model.etdp --etrecord model.etrecord --debug-buffer debug.bin -o report.html
"""

from __future__ import annotations

import argparse
import os

from numdiff.cli._console import note
from numdiff.cli._extras import require
from numdiff.cli._options import add_artifacts
from numdiff.cli.analyze import add_label_option, parse_labels
from numdiff.errors import UsageError

EXTRA = "report"  # the extra it needs (numdiff.cli._extras)


def add_analysis_input(parser: argparse.ArgumentParser) -> None:
    """ANALYSIS.json, or the same artifact flags as 'numdiff analyze' (shared by report and trace)."""
    parser.add_argument("analysis", nargs="?", metavar="ANALYSIS.json",
                        help="analysis file written by 'numdiff analyze' (or give the artifact flags instead)")
    add_artifacts(parser)
    for action in parser._actions:  # the artifacts are optional here: an analysis file can stand in
        if action.dest == "etdump":
            action.required = False
            action.help = (action.help or "") + " (instead of ANALYSIS.json)"
    add_label_option(parser)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_analysis_input(parser)
    parser.add_argument("-o", "--output", required=True, metavar="PATH", help="HTML file to write")


def load_or_analyse(args: argparse.Namespace) -> object:
    """The analysis named by the command's arguments: a file, or the artifacts analysed now."""
    from numdiff.report import Analysis

    if args.analysis and args.etdump:
        raise UsageError("give either ANALYSIS.json or --etdump/--etrecord/--debug-buffer, not both\n"
                         "An analysis file already holds everything the artifacts would give.")
    if args.analysis:
        if args.etrecord or args.debug_buffer or args.label:
            raise UsageError("--etrecord, --debug-buffer and --label go with --etdump, not with ANALYSIS.json\n"
                             "Labels are stored by 'numdiff analyze --label KEY=VALUE'.")
        return Analysis.load(args.analysis)
    if not args.etdump:
        raise UsageError("nothing to report on\nGive ANALYSIS.json (from 'numdiff analyze') or --etdump PATH.")
    from numdiff.cli._progress import ProgressLine

    labels = parse_labels(args.label)
    bar = ProgressLine()
    try:
        return Analysis.from_files(args.etdump, args.etrecord, args.debug_buffer, labels=labels, progress=bar)
    finally:
        bar.close()


def run(args: argparse.Namespace) -> int:
    require("numdiff report", EXTRA)
    from numdiff.report import Analysis, write_html

    analysis = load_or_analyse(args)
    assert isinstance(analysis, Analysis)
    write_html(analysis, args.output)
    note(f"wrote {args.output} ({os.path.getsize(args.output) / 1e6:.2f} MB)")
    return 0
