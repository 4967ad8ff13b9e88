"""Fleet views of a batch: which op diverges on which device, and what it costs there.

`numdiff fleet summary OUT_DIR` reads the tables `numdiff batch` wrote and prints, per op and per
value of a label (device by default): the runs where the op diverges (culprit verdict suspicious or
broken; without culprit localization, SNR below the noise floor), the median SNR and the median
latency p50. With -o it also writes an HTML report with heat maps of op x device.

examples:
  numdiff fleet summary out/
  numdiff fleet summary out/ --by build -o fleet.html
"""

from __future__ import annotations

import argparse
import os

from numdiff.cli import _exit
from numdiff.cli._console import note
from numdiff.cli._extras import require

EXTRA = "batch"  # the extra it needs (numdiff.cli._extras)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="fleet_command", required=True, metavar="VIEW", help="view to show")
    p = sub.add_parser("summary", help="per-op x device view, printed and optionally as HTML",
                       description="Per-op x device view of a batch's tables (numdiff batch -o OUT_DIR).")
    p.add_argument("out_dir", metavar="OUT_DIR", help="folder written by numdiff batch")
    p.add_argument("--by", default="device", metavar="LABEL", help="label to group runs by (default: device)")
    p.add_argument("-o", "--output", default=None, metavar="PATH", help="also write the fleet HTML report here")


def run(args: argparse.Namespace) -> int:
    require("numdiff fleet", EXTRA, ["pyarrow"] + (["jinja2", "matplotlib"] if args.output else []))
    from numdiff.batch.fleet import load_tables, summarize, text_summary, write_fleet_html

    runs, ops = load_tables(args.out_dir)
    summary = summarize(runs, ops, by=args.by)
    print(text_summary(summary))
    if args.output:
        title = os.path.basename(os.path.normpath(args.out_dir)) or "fleet"
        write_fleet_html(summary, args.output, title=title)
        note(f"wrote {args.output} ({os.path.getsize(args.output) / 1e6:.2f} MB)")
    return _exit.OK
