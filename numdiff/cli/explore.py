"""Write Model Explorer overlays (local error, accumulated error, latency per ATen node).

Writes node-data JSON files in Model Explorer's custom node data format into -o DIR; load
them in Model Explorer next to the model's exported program. An analysis without the gap (no
debug buffer or ETRecord) has nothing to overlay: exit status 3, and nothing is written. With --open (needs the
ETRecord and the `ai-edge-model-explorer` package: pip install -c constraints.txt -e '.[explorer]'), starts
Model Explorer on the ETRecord's ATen program with the overlays applied.

examples:
  numdiff explore run.json -o overlays/
  numdiff explore --etdump model.etdp --etrecord model.etrecord --debug-buffer debug.bin -o overlays/ --open
"""

from __future__ import annotations

import argparse
import importlib

from numdiff.cli._console import note
from typing import Any

from numdiff.cli.report import add_analysis_input, load_or_analyse
from numdiff.errors import MissingDependencyError, UsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_analysis_input(parser)
    parser.add_argument("-o", "--output", required=True, metavar="DIR", help="folder for the node-data files")
    parser.add_argument("--open", action="store_true",
                        help="open Model Explorer on the ETRecord's ATen program with these overlays")


def run(args: argparse.Namespace) -> int:
    from numdiff.report import Analysis
    from numdiff.errors import MissingDataError
    from numdiff.report.explorer import node_data, write_node_data

    if args.open and not args.etrecord:
        raise UsageError("--open needs --etrecord (Model Explorer shows the ETRecord's exported program)\n"
                         "Give the artifact flags instead of ANALYSIS.json.")
    explorer: Any = None
    if args.open:
        try:
            explorer = importlib.import_module("model_explorer")
        except ImportError as e:
            raise MissingDependencyError("numdiff explore --open", "model_explorer", "explorer",
                                         otherwise="or leave out --open") from e
    analysis = load_or_analyse(args)
    assert isinstance(analysis, Analysis)
    if not node_data(analysis):
        raise MissingDataError("nothing to write: the analysis has no numerical gap, so no error or latency "
                               "per ATen node\nGive --etrecord and --debug-buffer (or an analysis made with them).")
    paths = write_node_data(analysis, args.output)
    note(f"wrote {len(paths)} node-data file(s) to {args.output}: "
          + ", ".join(p.rsplit("/", 1)[-1] for p in paths))
    if explorer is not None:
        from numdiff.inspector import Inspector

        program = Inspector(etdump_path=args.etdump, etrecord=args.etrecord).get_exported_program()
        if program is None:
            raise UsageError("the ETRecord holds no ATen exported program to show\n"
                             "Write the ETRecord with generate_etrecord=True on an exported program.")
        explorer.visualize_pytorch(analysis.labels.get("model", "numdiff"), program,
                                   node_data=[{"name": p.rsplit("/", 1)[-1], "node_data_path": p} for p in paths])
    return 0
