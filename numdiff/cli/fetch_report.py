"""Download a run's HTML report from a numdiff service.

Exit status 3 when the run has no report (its analysis failed: the reason is printed),
5 for a refused token or a run outside the token's project, 6 when the server cannot be reached.

example:
  numdiff fetch-report --server http://127.0.0.1:8000 --token $T 12 -o report.html
"""

from __future__ import annotations

import argparse

from numdiff.cli._console import note
from numdiff.cli._extras import require

EXTRA = "service"  # pip install 'numdiff[service]'


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from numdiff.cli._service import add_client_options

    add_client_options(parser)
    parser.add_argument("run_id", type=int, metavar="RUN_ID", help="the run's id")
    parser.add_argument("-o", "--output", required=True, metavar="FILE", help="where to write the report")


def run(args: argparse.Namespace) -> int:
    require("numdiff fetch-report", "client")
    from numdiff.cli._service import client_from

    with client_from(args) as client:
        path = client.fetch_report(args.run_id, args.output)
    note(f"wrote {path}")
    return 0
