"""Download a run's HTML report from a numdiff service.

The report is streamed to a private temporary file beside FILE, which replaces FILE only when the
whole report has arrived. Exit status 3 when the run has no report (its analysis failed: the reason
is printed), 4 when the server redirects or sends a report over --max-bytes, shorter than it announced
or empty (FILE is left as it was), 5 for a refused token or a run outside the token's project, 6 when
the server cannot be reached.

example:
  numdiff fetch-report --server http://127.0.0.1:8000 --token $T 12 -o report.html
"""

from __future__ import annotations

import argparse

from numdiff.cli._console import note
from numdiff.cli._extras import require

EXTRA = "service"  # the extra it needs (numdiff.cli._extras)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from numdiff.cli._service import add_client_options

    add_client_options(parser)
    parser.add_argument("run_id", type=int, metavar="RUN_ID", help="the run's id")
    parser.add_argument("-o", "--output", required=True, metavar="FILE", help="where to write the report")
    parser.add_argument("--max-bytes", type=int, default=None, metavar="N",
                        help="refuse a report larger than N bytes (default: 256 MiB)")


def run(args: argparse.Namespace) -> int:
    require("numdiff fetch-report", "client")
    from numdiff.cli._service import client_from
    from numdiff.errors import UsageError
    from numdiff.service.client import MAX_REPORT_BYTES

    if args.max_bytes is not None and args.max_bytes < 1:
        raise UsageError(f"--max-bytes {args.max_bytes}: give a positive number of bytes")
    with client_from(args) as client:
        path = client.fetch_report(args.run_id, args.output, max_bytes=args.max_bytes or MAX_REPORT_BYTES)
    note(f"wrote {path}")
    return 0
