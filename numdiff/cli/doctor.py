"""Check that the files belong together and say what to change to get what is missing.

Checks: the files open (a debug buffer that is a zip, an ETDump or a .pte fails); runs per block;
ETRecord present and linked (debug handles, delegate map, representative inputs); share of
runtime ops that logged intermediate outputs; with an ETRecord and a debug buffer, that the
logged values come from the program the ETRecord describes (each op replayed on its logged
inputs, as numdiff culprits does: another model's debug buffer fails); timing sanity
(zero durations, plausible time scale). Each line is ok, warn or fail, with the fix for the
export or runtime settings.

exit status: 3 when a file is refused or the files do not belong together (bad input, as for every
command), 1 when another check fails, 0 otherwise (warnings included).

example:
  numdiff doctor --etdump model.etdp --etrecord model.etrecord --debug-buffer debug.bin
"""

from __future__ import annotations

import argparse

from numdiff.cli._exit import BAD_INPUT, CHECK_FAILED, OK
from numdiff.cli._options import add_artifacts, add_width, terminal_width

_INDENT = " " * 6  # under the check's name, past "WARN  "


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_artifacts(parser)
    inputs = parser.add_argument_group("the run's inputs").add_mutually_exclusive_group()
    inputs.add_argument("--step-inputs", default=None, metavar="PATH",
                        help="torch.save file of a list with each run's input tuple: the replay check runs on them")
    inputs.add_argument("--inputs-are-representative", action="store_true",
                        help="the run used the ETRecord's representative inputs")
    add_width(parser.add_argument_group("output"), "the lines", "longer ones wrap, indented under their check")


def run(args: argparse.Namespace) -> int:
    import textwrap

    from numdiff._core.terminal import printable
    from numdiff.analysis.doctor import diagnose_files

    width = max(terminal_width(args.width), 40)

    def say(first: str, text: str) -> None:  # file names and backends come from the files: escaped
        print("\n".join(textwrap.wrap(printable(text, newlines=False), width, initial_indent=first,
                                       subsequent_indent=_INDENT, break_on_hyphens=False, break_long_words=False)))

    from numdiff.analysis.stages import input_options

    findings = diagnose_files(args.etdump, args.etrecord, args.debug_buffer,
                              input_options(args.step_inputs, args.inputs_are_representative))
    for f in findings:
        say(f"{f.level.upper():4}  ", f"{f.check}: {f.detail}")
        if f.fix:
            say(_INDENT, f"{'note' if f.level == 'ok' else 'fix'}: {f.fix}")
    if any(f.bad_input for f in findings):
        return BAD_INPUT
    return CHECK_FAILED if any(f.level == "fail" for f in findings) else OK
