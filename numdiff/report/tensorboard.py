"""``Inspector.write_tensorboard_artifact``: the profiling view as TensorBoard event files.

The reference declares the method and writes nothing. numdiff writes, through ``tensorboardX``'s
``SummaryWriter`` (the optional ``tensorboard`` extra: no TensorFlow, no torch), one run
folder per event block under ``path`` (``<index>_<block name>[_<method>]``), holding:

* **scalars** ``latency/<op>``: for each op of the block (grouped as in ``get_op_list``), the
  op's total duration per run (the sum over its events), one point per run (step = run index);
  and ``latency/block_total``, the sum over all ops, per run;
* **histograms** ``latency_histogram/<op>``: every sample of the op's events;
* **text** ``op_list``: the op list table (count, total, average, p50, min, max, share) as
  Markdown, with the unit in the header.

Durations are in the Inspector's target time scale (the unit is in the text and in each tag's
description). ``tensorboard --logdir PATH`` shows them. Nothing in the events is executed; op
names are written as tag text only.

Example:
    >>> inspector.write_tensorboard_artifact("runs/model")  # doctest: +SKIP
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from numdiff.errors import MissingDependencyError, UsageError
from numdiff.profile.op_list import OpList
from numdiff.profile.events import EventBlock

__all__ = ["write_tensorboard"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-/]+")


def _writer_class() -> Any:
    try:
        from tensorboardX import SummaryWriter
    except ImportError as e:
        raise MissingDependencyError("write_tensorboard_artifact", "tensorboardX", "tensorboard") from e
    return SummaryWriter


def _tag(text: str) -> str:
    """A TensorBoard tag from an op name (spaces, parentheses, commas -> "_")."""
    return _UNSAFE.sub("_", text).strip("_") or "unnamed"


def _run_folder(index: int, block: EventBlock) -> str:
    name = block.name if block.method_name is None else f"{block.name}_{block.method_name}"
    return f"{index:02d}_{_tag(name).replace('/', '_')}"


def _markdown(ops: OpList) -> str:
    df = ops.to_dataframe()
    header = f"| op | count | total ({ops.unit}) | avg ({ops.unit}) | p50 | min | max | share |"
    lines = [header, "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for row in df.itertuples(index=False):
        cells = [f"{v:.6g}" if isinstance(v, float) and not math.isnan(v) else ("" if isinstance(v, float) else str(v))
                 for v in (row.total_avg, row.avg, row.p50, row.min, row.max)]
        share = "" if math.isnan(row.share) else f"{row.share:.1%}"
        op = str(row.op).replace("|", "\\|")
        lines.append(f"| {op} | {row.count} | " + " | ".join(cells) + f" | {share} |")
    return "\n".join(lines)


def write_tensorboard(path: str | os.PathLike[str], blocks: Sequence[EventBlock],
                      op_lists: Sequence[OpList]) -> list[str]:
    """Write one TensorBoard run per block; return the run folders written.

    Raises:
        MissingDependencyError: ``tensorboardX`` is not installed (the ``tensorboard`` extra).
        UsageError: ``path`` exists and is not a folder.
    """
    writer_class = _writer_class()
    root = os.fspath(path)
    if os.path.exists(root) and not os.path.isdir(root):
        raise UsageError(f"write_tensorboard_artifact: {root!r} exists and is not a folder\n"
                         "Pass a folder (it is created if missing); TensorBoard reads it with --logdir.")
    written = []
    for index, (block, ops) in enumerate(zip(blocks, op_lists, strict=True)):
        folder = os.path.join(root, _run_folder(index, block))
        writer = writer_class(logdir=folder)
        try:
            runs = max((len(e.perf_data.raw) for evs in ops.values() for e in evs if e.perf_data is not None),
                       default=0)
            block_total = np.zeros(runs)
            for op, events in ops.items():
                per_run = np.zeros(runs)
                samples: list[float] = []
                for event in events:
                    if event.perf_data is None:
                        continue
                    raw = np.asarray(event.perf_data.raw, dtype=np.float64)
                    per_run[: raw.size] += raw
                    samples += raw.tolist()
                if not samples:
                    continue
                block_total += per_run
                tag = _tag(op)
                for step, value in enumerate(per_run):
                    writer.add_scalar(f"latency/{tag}", float(value), step)
                writer.add_histogram(f"latency_histogram/{tag}", np.asarray(samples), 0)
            for step, value in enumerate(block_total):
                writer.add_scalar("latency/block_total", float(value), step)
            writer.add_text("op_list", _markdown(ops), 0)
        finally:
            writer.close()
        written.append(folder)
    return written
