"""Administer a numdiff service's database: create and revoke project tokens.

create-token prints the new token as the last line of stdout (it is stored hashed: keep it);
the project is created if it does not exist; with --expires-days N the token is refused after
N days (by default it is valid until revoked). revoke-token takes the token or the 12-character
prefix create-token printed.

example:
  numdiff admin create-token --data ./numdiff-data --project camera-models --expires-days 90
  numdiff admin revoke-token --data ./numdiff-data ndt_Ab3dEf6hIj
"""

from __future__ import annotations

import argparse

from numdiff.cli._console import note
from numdiff.cli._extras import require

EXTRA = "service"  # the extra it needs (numdiff.cli._extras)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from numdiff.cli.serve import add_db_options

    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION", help="what to do")
    create = sub.add_parser("create-token", help="create a token for a project (and the project if needed)",
                            description="create a token for a project (and the project if needed)")
    add_db_options(create)
    create.add_argument("--project", required=True, metavar="NAME", help="the project the token may see")
    create.add_argument("--expires-days", type=float, default=None, metavar="N",
                        help="refuse the token after N days (default: valid until revoked)")
    revoke = sub.add_parser("revoke-token", help="revoke a token", description="revoke a token")
    add_db_options(revoke)
    revoke.add_argument("token", metavar="TOKEN", help="the token, or the 12-character prefix create-token printed")


def run(args: argparse.Namespace) -> int:
    from numdiff.errors import UsageError

    require("numdiff admin", EXTRA)
    from numdiff.service import auth, db
    from numdiff.service.server import prepare
    from numdiff.service.settings import Settings

    settings = Settings.create(args.data, args.db)
    prepare(settings)
    engine = db.make_engine(settings.db_url)
    try:
        with db.session_factory(engine)() as session:
            if args.action == "create-token":
                name = args.project.strip()
                if not name or len(name) > 200:
                    raise UsageError(f"--project {args.project!r}: give a name of 1 to 200 characters")
                days = args.expires_days
                if days is not None and not 0 < days <= 36500:
                    raise UsageError(f"--expires-days {days:g}: give a number of days greater than 0 "
                                     "(at most 36500), or leave it out for a token valid until revoked")
                token = auth.create_token(session, name, days)
                until = "" if days is None else f", valid for {days:g} day(s)"
                note(f"token for project {name!r} (prefix {token[:12]}{until}; shown once, stored hashed):")
                print(token)
                return 0
            n = auth.revoke_token(session, args.token)
            if n == 0:
                raise UsageError("no active token matches\nGive the whole token or the 12-character prefix "
                                 "that create-token printed.")
            print(f"revoked {n} token(s)")
            return 0
    finally:
        engine.dispose()
