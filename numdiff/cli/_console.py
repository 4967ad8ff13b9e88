"""What the CLI says on stderr besides errors: notes ("wrote ...") and warnings, one line each.

The library speaks Python (``warnings.warn`` with its keyword names, several lines); a person at a
terminal gets ``numdiff profile: warning: ...`` on one line, in the CLI's terms (``--debug-buffer``,
not ``debug_buffer_path=``). ``--quiet`` keeps notes, warnings and the progress line off stderr;
errors are always printed. ``--debug`` shows each warning whole, with its extra lines.
"""

from __future__ import annotations

import re
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from numdiff._core.terminal import printable

__all__ = ["cli_warnings", "is_quiet", "note", "one_line_warning", "set_quiet"]

_quiet = False

#: Library keywords a warning may name, and the command-line options that set them.
_CLI_TERMS = (
    (re.compile(r"\(?pass debug_buffer_path=\)?"), "(give --debug-buffer)"),
    (re.compile(r"\bdebug_buffer_path="), "--debug-buffer"),
    (re.compile(r"\betdump_path="), "--etdump"),
    (re.compile(r"\betrecord="), "--etrecord"),
    (re.compile(r"\bsource_time_scale="), "--source-time-scale"),
    (re.compile(r"\btarget_time_scale="), "--target-time-scale"),
    (re.compile(r"\breference_graph="), "--reference-graph"),
    (re.compile(r"\bdisable_debug_handle_validation="), "--disable-debug-handle-validation"),
)


def set_quiet(quiet: bool) -> None:
    """Set by ``numdiff.cli.main`` from ``--quiet`` for the command it runs."""
    global _quiet
    _quiet = quiet


def is_quiet() -> bool:
    """Whether ``--quiet`` was given."""
    return _quiet


def note(message: str, stream: TextIO | None = None) -> None:
    """A note for the person at the terminal (what was written, how many runs): stderr, unless quiet."""
    if not _quiet:
        print(printable(message), file=stream if stream is not None else sys.stderr)


#: Commands that take a run's files otherwise than as --etdump/--debug-buffer, and their own terms.
_COMMAND_TERMS = {
    "compare-runs": ((re.compile(r"\(?pass debug_buffer_path=\)?"), "(give it as --run NAME=ETDUMP,DEBUG_BUFFER)"),),
}
_command = ""


def _cli_terms(text: str) -> str:
    for pattern, replacement in _COMMAND_TERMS.get(_command, ()) + _CLI_TERMS:
        text = pattern.sub(replacement, text)
    return text


def one_line_warning(message: str) -> str:
    """A warning's text as one line in the CLI's terms, its control characters shown as escapes.

    The first line is kept; a single extra line (the usual hint) is joined to it; longer tails (a list
    of notes) are counted, and ``--debug`` shows them.
    """
    lines = [printable(line.strip(), newlines=False) for line in _cli_terms(message).splitlines() if line.strip()]
    if not lines:
        return ""
    first = lines[0].removeprefix("numdiff: ")
    if len(lines) == 1:
        return first
    if len(lines) == 2:
        return f"{first} {lines[1]}"
    return f"{first} {lines[1]} (and {len(lines) - 2} more; --debug shows them)"


@contextmanager
def cli_warnings(command: str, *, debug: bool) -> Iterator[None]:
    """Show the warnings raised inside as ``<command>: warning: ...`` lines (none with ``--quiet``).

    Each distinct warning is shown once; Python's format (file, line, source code) never appears.
    """

    global _command
    _command = command.split()[-1] if command else ""

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: TextIO | None = None, line: str | None = None) -> None:
        if _quiet:
            return
        text = str(message)
        if debug:
            body = printable(_cli_terms(text)).replace("\n", "\n    ")
            print(f"{command}: warning: {body}", file=sys.stderr)
        else:
            print(f"{command}: warning: {one_line_warning(text)}", file=sys.stderr)

    with warnings.catch_warnings():
        warnings.simplefilter("default")
        if not debug:  # addressed to the developers of the libraries numdiff uses, not to its users
            for category in (DeprecationWarning, PendingDeprecationWarning):
                warnings.simplefilter("ignore", category)
        warnings.showwarning = show
        yield
