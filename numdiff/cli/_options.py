"""Option groups shared by several commands, defined once."""

from __future__ import annotations

import argparse

from numdiff.profile.timescale import TimeScale

SCALES = [t.value for t in TimeScale]


def add_artifacts(parser: argparse.ArgumentParser, *, etrecord_required: bool = False,
                  debug_buffer_required: bool = False) -> None:
    g = parser.add_argument_group("artifacts")
    g.add_argument("--etdump", required=True, metavar="PATH", help="ETDump file the runtime wrote (.etdp)")
    g.add_argument("--etrecord", required=etrecord_required, metavar="PATH",
                   help="ETRecord the export step wrote; links events to ops, stack traces and modules"
                   + ("" if etrecord_required else " (optional)"))
    g.add_argument("--debug-buffer", required=debug_buffer_required, metavar="PATH",
                   help="debug buffer holding the logged tensors"
                   + ("" if debug_buffer_required else " (optional; needed for tensor values)"))


def add_time_scales(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("time units")
    g.add_argument("--source-time-scale", default="ns", choices=SCALES,
                   help="unit of the runtime's timestamps (default: ns)")
    g.add_argument("--target-time-scale", default="ms", choices=SCALES,
                   help="unit to report durations in (default: ms)")


def add_width(group: argparse.ArgumentParser | argparse._ArgumentGroup, what: str = "the tables",
              how: str = "") -> None:
    """``--width N``: how wide the terminal views are (read with :func:`terminal_width`); ``how`` says what
    gives way when they are too wide."""
    group.add_argument("--width", type=int, default=None, metavar="N",
                       help=f"width of {what} in characters{'; ' + how if how else ''} (default: the terminal's, "
                       "or $COLUMNS; 100 when the output is not a terminal)")


def terminal_width(width: int | None) -> int:
    """``--width`` when given (a positive number), else the terminal's width ($COLUMNS first; 100 when there is none)."""
    import shutil

    from numdiff.errors import UsageError

    if width is None:
        return shutil.get_terminal_size((100, 24)).columns
    if width < 1:
        raise UsageError(f"--width {width}: give a positive number of characters")
    return width
