"""Compare two saved analyses (a base build and a new one) and fail on regressions (CI gate).

Ops are matched by name; for each, the change of error (lowest SNR of the layer, capped at
--snr-cap-db) and of latency (p50), rolled up by op category (convolution, matmul/GEMM,
normalization, data movement, elementwise, other) and by delegate with its coverage (share of
top-level ops and time inside the delegate).

A regression: an op whose SNR fell by more than --max-snr-drop-db (default 3 dB), or an op or
the whole run whose p50 grew by more than --max-latency-increase-pct (default 10 %) and by at
least --min-latency-increase-us (default 5 µs). --format markdown prints a pull-request comment.

The gate passes only what it compared: the two analyses must be of one program (their ETRecords'
program signatures agree; an older analysis without one is compared with a warning), and at least
--min-matched-share (default 0.5) of the base's layers and of its timed ops must be found in NEW.

exit status: 0 no regression; 1 a regression, or too little of the base matched in NEW (the gate
fails); 3 the analyses are of different programs, or a file is unreadable.

example:
  numdiff analyze ... -o base.json   # on the main branch
  numdiff analyze ... -o new.json    # on the pull request
  numdiff diff base.json new.json --format markdown > comment.md
"""

from __future__ import annotations

import argparse

EXIT_REGRESSION = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from numdiff.analysis.diff import GateThresholds

    d = GateThresholds()
    parser.add_argument("base", metavar="BASE.json", help="analysis of the reference build (numdiff analyze)")
    parser.add_argument("new", metavar="NEW.json", help="analysis of the build to check")
    parser.add_argument("--format", choices=("table", "json", "markdown"), default="table",
                        help="output format (default: table)")
    g = parser.add_argument_group("thresholds")
    g.add_argument("--max-snr-drop-db", type=float, default=d.max_snr_drop_db, metavar="DB",
                   help=f"largest allowed fall of an op's SNR (default: {d.max_snr_drop_db:g})")
    g.add_argument("--max-latency-increase-pct", type=float, default=d.max_latency_increase_pct, metavar="PCT",
                   help=f"largest allowed growth of an op's or the run's p50, in percent (default: {d.max_latency_increase_pct:g})")
    g.add_argument("--min-latency-increase-us", type=float, default=d.min_latency_increase_us, metavar="US",
                   help=f"latency growth below this many µs is never a regression (default: {d.min_latency_increase_us:g})")
    g.add_argument("--snr-cap-db", type=float, default=d.snr_cap_db, metavar="DB",
                   help=f"SNR above this counts as this (rounding noise; identical is infinite) (default: {d.snr_cap_db:g})")
    g.add_argument("--min-matched-share", type=float, default=d.min_matched_share, metavar="SHARE",
                   help="fail when fewer than this share (0 to 1) of the base's layers or timed ops are found in NEW "
                        f"(default: {d.min_matched_share:g})")


def run(args: argparse.Namespace) -> int:
    from numdiff.errors import UsageError
    from numdiff.report import Analysis
    from numdiff.report.diff_render import render_diff
    from numdiff.analysis.diff import GateThresholds, diff_analyses

    for name in ("max_snr_drop_db", "max_latency_increase_pct", "min_latency_increase_us", "snr_cap_db"):
        value = getattr(args, name)
        if not value >= 0 or value == float("inf"):
            raise UsageError(f"--{name.replace('_', '-')} is {value}, not a finite number >= 0\n"
                             "Give a threshold such as 3 (dB) or 10 (percent).")
    if not 0 <= args.min_matched_share <= 1:
        raise UsageError(f"--min-matched-share is {args.min_matched_share}, not a share between 0 and 1\n"
                         "Give a share such as 0.5 (half of the base's ops must be compared).")
    thresholds = GateThresholds(args.max_snr_drop_db, args.max_latency_increase_pct, args.min_latency_increase_us,
                                args.snr_cap_db, args.min_matched_share)
    report = diff_analyses(Analysis.load(args.base), Analysis.load(args.new), thresholds)
    text = render_diff(report, args.format)
    if args.format != "json":  # op names come from the files; JSON escapes control characters itself
        from numdiff._core.terminal import printable

        text = printable(text)
    print(text, end="")
    return 0 if report else EXIT_REGRESSION
