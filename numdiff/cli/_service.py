"""Options shared by the service client commands (submit, runs, fetch-report)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from numdiff.client import Client

__all__ = ["add_client_options", "client_from", "print_json", "status_code"]


def add_client_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--server", default=None, metavar="URL",
                        help="the numdiff service, e.g. http://127.0.0.1:8000 (default: $NUMDIFF_SERVER)")
    parser.add_argument("--token", default=None, metavar="T",
                        help="the project's bearer token (default: $NUMDIFF_TOKEN)")


def client_from(args: argparse.Namespace) -> Client:
    from numdiff.client import Client

    return Client(args.server, args.token)


def print_json(data: object) -> None:
    sys.stdout.write(json.dumps(data, indent=1, allow_nan=False) + "\n")


def status_code(run: dict[str, Any], waited: bool) -> int:
    """0 when done (or not waited for); 3 when the analysis failed (the reason is in the JSON)."""
    from numdiff.service.status import Status

    if waited and run.get("status") == Status.FAILED:
        from numdiff._core.terminal import printable

        print(printable(f"numdiff: run {run.get('id')} failed: {run.get('reason')}", newlines=False), file=sys.stderr)
        return 3
    return 0
