"""Runs on a numdiff service: show one (as `numdiff submit` prints it), list them, compare two, set a baseline.

compare is the CI gate over HTTP, printed as numdiff diff prints it (--format json for the server's
answer, markdown for a pull-request comment): exit status 1 when NEW regressed against BASE (or the
model's baseline) or too little of BASE was matched in NEW, 3 when the two runs are of different
programs (their ETRecords' program signatures differ; the server answers 409). baseline makes a run
the model's baseline (what compare uses without --base). Exit status 5 for a refused token or a run
outside the token's project (an unknown run looks the same), 6 when the server cannot be reached.

example:
  numdiff runs show --server http://127.0.0.1:8000 --token $T 12 --wait
  numdiff runs list --model mlp --label device=pixel8
  numdiff runs compare 12 --base 7
  numdiff runs baseline mlp 7
"""

from __future__ import annotations

import argparse

from numdiff.cli._extras import require

EXTRA = "service"  # the extra it needs (numdiff.cli._extras)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from numdiff.cli._service import add_client_options
    from numdiff.service.status import Status

    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION", help="what to do")
    show = sub.add_parser("show", help="print a run as JSON", description="print a run as JSON")
    add_client_options(show)
    show.add_argument("run_id", type=int, metavar="RUN_ID", help="the run's id")
    show.add_argument("--wait", action="store_true", help="wait until it is analysed")
    lst = sub.add_parser("list", help="list runs as JSON", description="list runs as JSON (newest first)")
    add_client_options(lst)
    lst.add_argument("--model", default=None, help="only runs of this model")
    lst.add_argument("--status", default=None, choices=[s.value for s in Status], help="only runs in this state")
    lst.add_argument("--label", action="append", default=[], metavar="KEY=VALUE",
                     help="only runs with this label (as given to numdiff submit --label); repeatable, all must match")
    cmp = sub.add_parser("compare", help="compare a run with another or the baseline (CI gate)",
                         description="compare a run with another or the model's baseline; exit 1 on a regression or when too "
                                     "little was compared, 3 when the runs are of different programs")
    add_client_options(cmp)
    cmp.add_argument("new", type=int, metavar="NEW", help="the run to check")
    cmp.add_argument("--base", type=int, default=None, help="the run to compare with (default: the model's baseline)")
    cmp.add_argument("--format", choices=("table", "json", "markdown"), default="table",
                     help="table: for a person, as numdiff diff prints it (default); json: the server's answer "
                     "(passed, base_run, new_run, regressions, diff); markdown: a pull-request comment")
    base = sub.add_parser("baseline", help="make a run the model's baseline (what compare uses without --base)",
                          description="make RUN_ID the baseline of MODEL; prints the model as JSON")
    add_client_options(base)
    base.add_argument("model", metavar="MODEL", help="the model's name (as given to numdiff submit --model)")
    base.add_argument("run_id", type=int, metavar="RUN_ID", help="the run to compare new runs with")


def run(args: argparse.Namespace) -> int:
    require(f"numdiff runs {args.action}", "client")
    from numdiff.cli._service import client_from, print_json, status_code
    from numdiff.cli.analyze import parse_labels

    with client_from(args) as client:
        if args.action == "show":
            out = client.wait(args.run_id) if args.wait else client.result(args.run_id)
            print_json(out)
            return status_code(out, args.wait)
        if args.action == "list":
            print_json(client.runs(args.model, args.status, parse_labels(args.label)))
            return 0
        if args.action == "baseline":
            print_json(client.set_baseline(args.model, args.run_id))
            return 0
        result = client.compare(args.new, args.base)
        if args.format == "json":
            print_json(result)
        else:
            from numdiff._core.terminal import printable
            from numdiff.report.diff_render import render_diff, report_from_json

            title = f"numdiff runs compare: run {result['new_run']} against run {result['base_run']}" + (
                "" if args.base is not None else " (the model's baseline)")
            print(printable(render_diff(report_from_json(result["diff"]), args.format, title)), end="")
        return 0 if result["passed"] else 1
