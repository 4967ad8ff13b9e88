"""Analyse many runs (a device lab's fleet) and write one table of them, in parallel.

MANIFEST is a CSV, JSON or YAML file, or a directory. A CSV has the columns run, etdump, etrecord,
debug_buffer (paths relative to the manifest, and inside its folder unless --allow-outside is given)
and any label columns (device, build, input_set ...).
A directory: every folder with etdump.etdp is a run; debug_buffer.bin beside it, etrecord.bin beside
it or in a parent folder; key=value folder names become labels.

OUT_DIR gets runs.parquet (one row per run: run, labels, status, error ...), ops.parquet (one row
per run x aligned op: run, labels, aot_ops, snr_db, verdict, latency_p50_ms ...) and analyses/ (each
run's saved analysis, readable by numdiff report). A run that fails is recorded with its reason and
the batch goes on; re-running skips runs already analysed (keyed by the artifacts' hashes).
Exit status 0 when every run was analysed, 3 when some failed (see runs.parquet), or when no run
of the manifest has the ETRecord and debug buffer the gap needs (use --analyses profile for profiles only).

examples:
  numdiff batch fleet.csv -o out/ --workers 2
  numdiff batch fleet.csv -o out/ --backend ray --address auto
  numdiff fleet summary out/ --by device -o fleet.html
"""

from __future__ import annotations

import argparse
import sys

from numdiff.cli import _exit
from numdiff.cli._console import note
from numdiff.cli._extras import require

EXTRA = "batch"  # the extra it needs (numdiff.cli._extras)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("manifest", metavar="MANIFEST", help="CSV/JSON/YAML manifest, or a directory of runs")
    parser.add_argument("-o", "--output", required=True, metavar="OUT_DIR",
                        help="folder for runs.parquet, ops.parquet and analyses/ (created if needed)")
    parser.add_argument("--backend", choices=["pool", "ray"], default="pool",
                        help="pool: local processes (default); ray: Ray tasks (the ray extra: "
                        "pip install -c constraints.txt -e '.[ray]')")
    parser.add_argument("--workers", type=int, default=None, metavar="N",
                        help="processes (pool) or tasks in flight (ray); default: the CPU count")
    parser.add_argument("--address", default=None, metavar="ADDR",
                        help="Ray cluster to use (e.g. auto, ray://HEAD:10001); default: start a local Ray")
    parser.add_argument("--allow-outside", action="store_true",
                        help="accept artifact paths outside the manifest's folder (.., absolute, ~, symlinks out); "
                             "only for a manifest you trust")
    parser.add_argument("--analyses", default="profile,gap,culprits", metavar="LIST",
                        help="what to compute per run: profile[,gap[,culprits]] (default: all three)")
    parser.add_argument("--inputs-are-representative", action="store_true",
                        help="every run without its own step_inputs (manifest column, or step_inputs.pt beside its "
                        "ETDump) used the ETRecord's representative inputs: judge the ops that read a graph input "
                        "the runtime did not log on them (as numdiff analyze --inputs-are-representative)")


def run(args: argparse.Namespace) -> int:
    require("numdiff batch", EXTRA, ["pyarrow"])  # YAML manifests need yaml too: load_manifest says so
    if args.backend == "ray":
        require("numdiff batch --backend ray", "ray")
    from numdiff.batch import load_manifest, run_batch
    from numdiff.batch.manifest import check_artifacts
    from numdiff.batch.runner import parse_analyses
    from numdiff.cli._progress import ProgressLine

    analyses = parse_analyses(args.analyses)
    specs = load_manifest(args.manifest, allow_outside=args.allow_outside)
    check_artifacts(specs, analyses, args.manifest)
    bar = ProgressLine()
    try:
        result = run_batch(specs, args.output, backend=args.backend, workers=args.workers, address=args.address,
                           analyses=analyses, progress=bar, inputs_are_representative=args.inputs_are_representative)
    finally:
        bar.close()
    analysed = result.ok - result.reused
    rate = f", {analysed / result.seconds:.1f} runs/s" if analysed and result.seconds > 0 else ""
    note(f"{result.total} runs: {analysed} analysed, {result.reused} already done, {result.failed} failed "
          f"({result.seconds:.1f} s{rate})")
    note(f"wrote {result.runs_path} and {result.ops_path}")
    if result.failed:
        print(f"{result.failed} run(s) failed: see the status and error columns of {result.runs_path}", file=sys.stderr)
        return _exit.BAD_INPUT
    return _exit.OK
