"""``numdiff`` command line: a thin layer of commands over the library.

Each command is a module with a docstring (its help), ``add_arguments(parser)`` and
``run(args) -> int``. ``main(argv)`` is callable from tests and returns the exit status.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence
from importlib import import_module
from types import ModuleType

from numdiff.errors import NumdiffError

__all__ = ["main"]


def _commands() -> dict[str, ModuleType]:
    from numdiff.cli import example, gap, profile

    return {"profile": profile, "gap": gap, "example": example,
            "analyze": import_module("numdiff.cli.analyze"),
            "culprits": import_module("numdiff.cli.culprits"),
            }


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="numdiff",
        description="Where do my model's numbers go wrong, and what does each op cost? "
        "Reads ExecuTorch's ETDump, debug buffer and ETRecord (ExecuTorch not needed).",
    )
    parser.add_argument("--verbose", action="store_true", help="show the full traceback on errors")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module in _commands().items():
        doc = (module.__doc__ or "").strip()
        p = sub.add_parser(name, help=doc.splitlines()[0], description=doc,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status (0 success, 1 numdiff error, 2 usage error)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args._run(args))
    except NumdiffError as e:
        if args.verbose:
            traceback.print_exc()
        print(f"numdiff {args.command}: error: " + " | ".join(str(e).splitlines()), file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
