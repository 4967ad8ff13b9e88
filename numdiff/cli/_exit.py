"""Exit statuses of the ``numdiff`` command line: stable, documented, one per kind of outcome.

====  ==================  ==============================================================================
code  name                meaning
====  ==================  ==============================================================================
0     ``OK``              success (also when the reader of our output closed the pipe early)
1     ``CHECK_FAILED``    the check ran and found a problem: a culprit, a regression, a gate failure
2     ``USAGE``           bad arguments (argparse errors, ``UsageError``)
3     ``BAD_INPUT``       a file is unreadable, corrupt, mismatched or lacks data (``InputError``), or
                          running/comparing the reference graph failed (``CaptureError``,
                          ``ComparatorError``)
4     ``INTERNAL``        a bug in numdiff: any exception that is not a ``NumdiffError``, or ``InternalError``
5     ``AUTH``            authentication or permission refused by a numdiff service
6     ``UNREACHABLE``     a numdiff service could not be reached
130   ``INTERRUPTED``     stopped with Ctrl-C (128 + SIGINT, as shells report it)
====  ==================  ==============================================================================

A ``NumdiffError`` subclass may set a class attribute ``exit_code`` (one of the codes above) to pick
its status explicitly; the service client's errors do that for 5 and 6.
"""

from __future__ import annotations

from numdiff.errors import (
    CaptureError,
    ComparatorError,
    InputError,
    InternalError,
    NumdiffError,
    UsageError,
)

__all__ = [
    "AUTH",
    "BAD_INPUT",
    "CHECK_FAILED",
    "EPILOG",
    "INTERNAL",
    "INTERRUPTED",
    "OK",
    "UNREACHABLE",
    "USAGE",
    "exit_code_for",
]

OK = 0
CHECK_FAILED = 1
USAGE = 2
BAD_INPUT = 3
INTERNAL = 4
AUTH = 5
UNREACHABLE = 6
INTERRUPTED = 130

_DOCUMENTED = frozenset({OK, CHECK_FAILED, USAGE, BAD_INPUT, INTERNAL, AUTH, UNREACHABLE, INTERRUPTED})

EPILOG = """exit status:
  0    success
  1    the check found a problem (a culprit, a regression, a gate failure, runs that part)
  2    bad arguments
  3    bad input: a file is unreadable, corrupt, mismatched or lacks data
  4    internal error: a bug in numdiff (re-run with --debug and report it)
  5    authentication or permission refused (service client)
  6    server unreachable (service client)
  130  interrupted (Ctrl-C)

Errors are one line on stderr; --debug (alias --verbose) also prints the traceback."""


def exit_code_for(error: NumdiffError) -> int:
    """The exit status for a ``NumdiffError`` (a non-numdiff exception is always ``INTERNAL``)."""
    explicit = getattr(error, "exit_code", None)
    if isinstance(explicit, int) and not isinstance(explicit, bool) and explicit in _DOCUMENTED:
        return explicit
    if isinstance(error, InternalError):
        return INTERNAL
    if isinstance(error, UsageError):
        return USAGE
    if isinstance(error, (InputError, CaptureError, ComparatorError)):
        return BAD_INPUT
    return BAD_INPUT  # any other deliberate error is about what the user gave numdiff
