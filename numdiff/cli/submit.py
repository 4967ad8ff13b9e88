"""Upload a run to a numdiff service and print it as JSON (id, status; with --wait also gap and culprits).

gap: the SNR rows as records with the columns of calculate_numeric_gap's DataFrame
(aot_ops, aot_intermediate_output, runtime_ops, runtime_intermediate_output, gap), the
intermediate outputs summarised (dtype, shapes, min/max/mean/std). Exit status 0 when uploaded
(and, with --wait, analysed); 3 when the server refuses the files or their analysis fails;
5 when the token is refused; 6 when the server cannot be reached.

example:
  numdiff submit --server http://127.0.0.1:8000 --token $T --model mlp \\
      --etrecord model.etrecord --etdump run.etdp --debug-buffer debug.bin --label device=pixel8 --wait
"""

from __future__ import annotations

import argparse

from numdiff.cli._extras import require

EXTRA = "service"  # the extra it needs (numdiff.cli._extras)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from numdiff.cli._service import add_client_options
    from numdiff.cli.analyze import add_label_option

    add_client_options(parser)
    parser.add_argument("--model", required=True, metavar="NAME", help="the model the run belongs to")
    parser.add_argument("--etrecord", required=True, metavar="F", help="the model's ETRecord")
    parser.add_argument("--etdump", required=True, metavar="F", help="the run's ETDump")
    parser.add_argument("--debug-buffer", default=None, metavar="F", help="the run's debug buffer (for the gap)")
    add_label_option(parser)
    inputs = parser.add_mutually_exclusive_group()
    inputs.add_argument("--step-inputs", default=None, metavar="F",
                        help="the inputs the run used: torch.save file of a list with each run's input tuple (as "
                        "numdiff analyze --step-inputs); the service judges the run on them")
    inputs.add_argument("--inputs-are-representative", action="store_true",
                        help="the run used the ETRecord's representative inputs: the service judges every op that "
                        "reads a graph input the runtime did not log on them (as numdiff analyze "
                        "--inputs-are-representative; by default such ops are judged only when the run shows it "
                        "used those inputs)")
    parser.add_argument("--wait", action="store_true", help="wait for the analysis and print its results")


def run(args: argparse.Namespace) -> int:
    require("numdiff submit", "client")
    from numdiff.cli._service import client_from, print_json, status_code
    from numdiff.cli.analyze import parse_labels

    labels = parse_labels(args.label)
    with client_from(args) as client:
        out = client.submit(args.model, args.etrecord, args.etdump, args.debug_buffer, labels,
                            step_inputs=args.step_inputs, inputs_are_representative=args.inputs_are_representative)
        if args.wait:
            out = client.wait(out["id"])
    print_json(out)
    return status_code(out, args.wait)
