"""Print the profiling table: one row per runtime event, durations across runs.

By default a table for a person, fitted to the terminal's width: op, calls, p50, avg, share of
Method::execute, delegate. --full prints the reference Inspector's print_data_tabular grid (every
column, OPERATOR_CALL rows and wide columns left out); --format tsv, csv or json writes that grid's
rows to stdout for other programs (JSON: numbers as numbers, null where there is none).

examples:
  numdiff profile --etdump model.etdp --etrecord model.etrecord --target-time-scale us
  numdiff profile --etdump model.etdp --full
  numdiff profile --etdump model.etdp --format csv > events.csv

An ETDump with Arm VGF neural statistics (versions 1 and 2) gets one line per record after the
table: device, driver, statistics mode and counter layout (version 2 records carry them).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from numdiff.cli._options import add_artifacts, add_time_scales, add_width, terminal_width

if TYPE_CHECKING:
    import pandas as pd

if TYPE_CHECKING:
    from numdiff.inspector import Inspector

FORMATS = ("table", "tsv", "csv", "json")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_artifacts(parser)
    add_time_scales(parser)
    out = parser.add_argument_group("output")
    out.add_argument("--full", action="store_true",
                     help="print the drop-in's grid (print_data_tabular: every column, as wide as it needs)")
    out.add_argument("--format", choices=FORMATS, default="table",
                     help="table: for a person (default); tsv, csv, json: the grid's rows for other programs")
    add_width(out, "the table")
    out.add_argument("--tsv", metavar="PATH", help="also write the grid's rows as tab-separated values to PATH "
                     "(as --format tsv: no index column)")


def run(args: argparse.Namespace) -> int:
    from numdiff.errors import UsageError
    from numdiff.inspector import Inspector

    if args.full and args.format != "table":
        raise UsageError(f"--full and --format {args.format} both choose the output\n"
                         "--full prints the grid for a terminal; --format writes its rows for other programs.")
    width = terminal_width(args.width)
    inspector = Inspector(etdump_path=args.etdump, etrecord=args.etrecord, debug_buffer_path=args.debug_buffer,
                          source_time_scale=args.source_time_scale, target_time_scale=args.target_time_scale)
    if args.full:
        import io

        from numdiff._core.terminal import printable

        grid = io.StringIO()  # event and delegate names come from the file: their control characters are escaped
        inspector.print_data_tabular(file=grid)
        sys.stdout.write(printable(grid.getvalue()))
    elif args.format == "table":
        from numdiff.report.profile_table import render_profile_table

        print(render_profile_table(inspector.to_dataframe(), args.target_time_scale, width))
    else:
        _write_rows(inspector, args.format)
    if args.full or args.format == "table":
        _print_vgf_statistics(inspector)
    if args.tsv:
        from numdiff._core.files import atomic_path

        with atomic_path(args.tsv) as tmp, open(tmp, "w", encoding="utf-8", newline="") as f:
            _grid(inspector).to_csv(f, sep="\t", index=False)
    return 0


def _grid(inspector: object) -> pd.DataFrame:
    """The rows of the drop-in's grid (``print_data_tabular``, ``save_data_to_tsv``), for other programs.

    Files and pipes get them without pandas' row numbers: ``Inspector.save_data_to_tsv`` keeps its
    leading index column, as the reference writes it; the command line leaves it out.
    """
    from numdiff.inspector import Inspector
    from numdiff.profile.frames import printable_dataframe

    assert isinstance(inspector, Inspector)
    return printable_dataframe(inspector.to_dataframe())


def _write_rows(inspector: object, fmt: str) -> None:
    from numdiff.cli._json import write_json
    from numdiff.inspector import Inspector

    assert isinstance(inspector, Inspector)
    df = _grid(inspector)
    if fmt in ("tsv", "csv"):
        df.to_csv(sys.stdout, sep="\t" if fmt == "tsv" else ",", index=False)
    else:
        write_json({"time_unit": inspector._target_time_scale.value, "events": df.to_dict(orient="records")})


def _print_vgf_statistics(inspector: Inspector) -> None:
    """One line per Arm VGF statistics record in the dump (device, driver, mode), if it has any."""
    from numdiff.errors import DelegateMetadataError
    from numdiff.profile.vgf import summarize

    try:
        records = inspector.get_vgf_neural_statistics()
    except DelegateMetadataError as e:  # the profile itself is fine; say what is wrong with the record
        from numdiff._core.terminal import printable

        print(f"VGF neural statistics not read: {printable(e)}", file=sys.stderr)
        return
    for record in records:
        print(summarize(record).describe())
