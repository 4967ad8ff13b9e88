"""Analyse one run and save everything numdiff knows about it to one JSON file.

The file holds the profile summary (latency per event across runs), the numerical gap of every
aligned pair (SNR, MSE and L1, with how each pair was matched), culprit rows when culprit
localization is available, the artifacts' SHA-256 hashes and your labels. `numdiff report`,
`numdiff trace` and `numdiff diff` read it; in Python, `numdiff.report.Analysis.load(path)`.
Without a debug buffer (or ETRecord) the file holds the profile only and says why.

The deeper-localization options of `numdiff culprits` (--float-program, --step-inputs /
--decode-steps, --taps) add the quantization view, the decode steps and the ops inside
delegates to the file; `numdiff report` shows them.

example:
  numdiff analyze --etdump model.etdp --etrecord model.etrecord --debug-buffer debug.bin \\
      --label device=pixel8 --label build=1234 -o run.json
  numdiff analyze ... --float-program float.etrecord -o run.json     (with the quantization view)
"""

from __future__ import annotations

import argparse

from numdiff.cli._console import note
from numdiff.cli._options import add_artifacts
from numdiff.cli.culprits import add_deeper_arguments, deeper_options
from numdiff.errors import UsageError


def add_label_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--label", action="append", default=[], metavar="KEY=VALUE",
                        help="remember KEY=VALUE with the analysis (device, build, model ...); repeatable")


def parse_labels(items: list[str]) -> dict[str, str]:
    labels: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--label {item!r} is not KEY=VALUE\nExample: --label device=pixel8")
        labels[key.strip()] = value.strip()
    return labels


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_artifacts(parser)
    add_label_option(parser)
    add_deeper_arguments(parser)
    parser.add_argument("-o", "--output", required=True, metavar="PATH", help="analysis file to write (JSON)")


def run(args: argparse.Namespace) -> int:
    from numdiff.report import Analysis

    from numdiff.cli._progress import ProgressLine

    labels = parse_labels(args.label)
    options = deeper_options(args)
    bar = ProgressLine()
    try:
        analysis = Analysis.from_files(args.etdump, args.etrecord, args.debug_buffer, labels=labels, progress=bar,
                                       culprit_options=options)
    finally:
        bar.close()
    analysis.save(args.output)
    rows = 0 if analysis.gap is None else len(analysis.gap.rows)
    events = sum(len(b.events) for b in analysis.profile.blocks)
    note(f"wrote {args.output}: {events} events, {rows} gap rows"
          + (f" (no gap: {analysis.gap_unavailable})" if analysis.gap is None else "")
          + ("" if analysis.culprits.available else f"; culprits {analysis.culprits.reason}")
          + "".join(f"; {name}" for name, view in (("quantization view", analysis.culprits.quantization),
                                                   ("decode steps", analysis.culprits.decode),
                                                   ("inside delegates", analysis.culprits.inside_delegates))
                    if view is not None))
    return 0
