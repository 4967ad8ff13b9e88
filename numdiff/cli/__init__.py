"""``numdiff`` command line: a thin layer of commands over the library.

Each command is a module with a docstring (its help), ``add_arguments(parser)`` and
``run(args) -> int``. ``main(argv)`` is callable from tests and returns the exit status
(the table is in ``numdiff.cli._exit`` and in ``numdiff --help``). Every error is one line on
stderr; ``--debug`` (alias ``--verbose``) adds the traceback. Warnings are one line each in the
CLI's terms (:mod:`numdiff.cli._console`); ``--quiet`` keeps notes, warnings and progress off stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence
from importlib import import_module
from types import ModuleType

from numdiff._core.terminal import printable
from numdiff.cli import _console, _exit, _extras
from numdiff.errors import InternalError, NumdiffError


__all__ = ["main"]

REPORT_HINT = ("this is a bug in numdiff: please report it to the numdiff maintainers with the command line, "
               "the numdiff version and (if you can share them) the input files; "
               "re-run with --debug for the traceback")


def _commands() -> dict[str, ModuleType]:
    from numdiff.cli import example, gap, profile

    return {"profile": profile, "gap": gap, "example": example,
            "analyze": import_module("numdiff.cli.analyze"),
            "report": import_module("numdiff.cli.report"),
            "trace": import_module("numdiff.cli.trace"),
            "diff": import_module("numdiff.cli.diff"),
            "doctor": import_module("numdiff.cli.doctor"),
            "explore": import_module("numdiff.cli.explore"),
            "culprits": import_module("numdiff.cli.culprits"),
            "compare-runs": import_module("numdiff.cli.compare_runs"),
            "batch": import_module("numdiff.cli.batch"),
            "fleet": import_module("numdiff.cli.fleet"),
            "serve": import_module("numdiff.cli.serve"),
            "admin": import_module("numdiff.cli.admin"),
            "submit": import_module("numdiff.cli.submit"),
            "runs": import_module("numdiff.cli.runs"),
            "fetch-report": import_module("numdiff.cli.fetch_report"),
            }


def _add_debug(parser: argparse.ArgumentParser, *, default: object) -> None:
    parser.add_argument("--debug", "--verbose", dest="debug", action="store_true", default=default,
                        help="print the full traceback with an error, and warnings whole (--verbose is an alias)")
    parser.add_argument("-q", "--quiet", dest="quiet", action="store_true", default=default,
                        help="print results and errors only: no notes, warnings or progress on stderr")
    for action in parser._actions:  # commands with views of their own (numdiff fleet summary ... --debug)
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _add_debug(child, default=argparse.SUPPRESS)


def _version() -> str:
    from numdiff import __version__

    return __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="numdiff",
        description="Where do my model's numbers go wrong, and what does each op cost? "
        "Reads ExecuTorch's ETDump, debug buffer and ETRecord (ExecuTorch not needed).",
        epilog=_exit.EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"numdiff {_version()}",
                        help="print numdiff's version and exit")
    _add_debug(parser, default=False)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module in _commands().items():
        doc = (module.__doc__ or "").strip()
        p = sub.add_parser(name, help=doc.splitlines()[0], description=doc,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(p)
        _add_debug(p, default=argparse.SUPPRESS)  # `numdiff gap ... --debug` works too
        p.set_defaults(_run=module.run, _extra=getattr(module, "EXTRA", None))
    return parser


_MAX_DETAIL = 500  # characters of an unexpected exception's message shown on the one line


def _one_line(text: str) -> str:
    """A message on one line, its control characters shown as escapes (a message may quote a file or a server)."""
    return printable(" | ".join(line for line in text.splitlines() if line.strip()), newlines=False)


def _short(error: BaseException) -> str:
    try:
        line = _one_line(str(error))
    except Exception:  # noqa: BLE001 - an exception whose message cannot even be built
        line = "(message unavailable)"
    return line if len(line) <= _MAX_DETAIL else line[:_MAX_DETAIL] + " ..."


def _silence_stdout() -> None:
    """After a broken pipe, point stdout at /dev/null so the interpreter's final flush stays quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout replaced by an object without a file descriptor
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status (see ``numdiff.cli._exit``). Bad arguments exit with 2."""
    parser = build_parser()
    args = parser.parse_args(argv)
    command = f"numdiff {args.command}"
    debug = bool(getattr(args, "debug", False))
    _console.set_quiet(bool(getattr(args, "quiet", False)))
    try:
        with _console.cli_warnings(command, debug=debug):
            try:
                return int(args._run(args))
            except ImportError as e:  # an optional package missing deep inside: name its extra
                missing = _extras.missing_extra(e, command, getattr(args, "_extra", None))
                if missing is None:
                    raise
                raise missing from e
    except BrokenPipeError:
        _silence_stdout()
        return _exit.OK
    except KeyboardInterrupt:
        if debug:
            traceback.print_exc()
        print(f"{command}: interrupted", file=sys.stderr)
        return _exit.INTERRUPTED
    except NumdiffError as e:
        if debug:
            traceback.print_exc()
        code = _exit.exit_code_for(e)
        if isinstance(e, InternalError):
            print(f"{command}: internal error: {_one_line(str(e))} ({REPORT_HINT})", file=sys.stderr)
        else:
            print(f"{command}: error: {_one_line(str(e))}", file=sys.stderr)
        return code
    except Exception as e:  # noqa: BLE001 - anything else is a bug; say so in one line
        if debug:
            traceback.print_exc()
        detail = _short(e)
        print(f"{command}: internal error: {type(e).__name__}{': ' + detail if detail else ''} ({REPORT_HINT})",
              file=sys.stderr)
        return _exit.INTERNAL
    finally:
        _console.set_quiet(False)
