"""Run the numdiff service: REST API, web pages and analysis workers, until SIGTERM/SIGINT.

Metadata goes to SQLite in --data by default (or PostgreSQL with --db postgresql://...),
uploads to a content-addressed store in --data. Open http://HOST:PORT/ui in a browser (sign in
with a token from `numdiff admin create-token`); the API's documentation is at /docs.
Limits (upload size, job memory and time) are set by NUMDIFF_SERVICE_* environment variables
(see numdiff.service.settings). Needs the service extra: pip install -c constraints.txt -e '.[service]'.

example:
  numdiff serve --data ./numdiff-data --port 8000 --workers 2
"""

from __future__ import annotations

import argparse

from numdiff.cli._extras import require

EXTRA = "service"  # the extra it needs (numdiff.cli._extras)


def add_db_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", required=True, metavar="DIR",
                        help="directory of the artifact store (and of the SQLite database by default)")
    parser.add_argument("--db", default=None, metavar="URL",
                        help="database URL, e.g. postgresql://user@host/db (default: sqlite in DIR)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_db_options(parser)
    parser.add_argument("--host", default="127.0.0.1", metavar="H", help="address to listen on (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, metavar="N", help="port to listen on (default: 8000)")
    parser.add_argument("--workers", type=int, default=2, metavar="N",
                        help="analysis worker processes (default: 2)")


def run(args: argparse.Namespace) -> int:
    from numdiff.errors import UsageError

    if args.workers < 0 or not 0 < args.port < 65536:
        raise UsageError(f"--workers {args.workers} / --port {args.port}: give workers >= 0 and a port in 1..65535")
    require("numdiff serve", EXTRA)
    from numdiff.service.server import serve
    from numdiff.service.settings import Settings

    serve(Settings.create(args.data, args.db), args.host, args.port, args.workers)
    return 0
