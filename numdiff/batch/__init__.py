"""Many runs in one command: analyse a fleet of ExecuTorch runs and write one table of them.

``numdiff batch MANIFEST -o OUT_DIR`` reads a manifest (:mod:`numdiff.batch.manifest`), analyses
every run in a local process pool or on Ray (:mod:`numdiff.batch.executors`), keeps each run's saved
analysis (:class:`numdiff.report.Analysis`) under ``OUT_DIR/analyses/`` so that a re-run skips
finished runs (:mod:`numdiff.batch.runner`), and writes ``runs.parquet`` and ``ops.parquet``
(:mod:`numdiff.batch.tables`). ``numdiff fleet summary OUT_DIR`` shows which op diverges on which
device and what it costs there (:mod:`numdiff.batch.fleet`).

Example:
    >>> from numdiff.batch import load_manifest, run_batch  # doctest: +SKIP
    >>> result = run_batch(load_manifest("fleet.csv"), "out", workers=2)  # doctest: +SKIP
    >>> import pandas; pandas.read_parquet("out/ops.parquet")  # doctest: +SKIP
"""

from __future__ import annotations

from numdiff.batch.manifest import ManifestError, RunSpec, load_manifest
from numdiff.batch.runner import ANALYSES, BatchResult, run_batch

__all__ = ["ANALYSES", "BatchResult", "ManifestError", "RunSpec", "load_manifest", "run_batch"]
