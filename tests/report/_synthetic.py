"""A large analysis (``n`` layers, ``n`` events) with realistic shapes of data, for report tests.

Values are made up but deterministic; the last third of the layers degrade after one bad op so
that the worst row, the noise floor and sorting have something to show.
"""

from __future__ import annotations

import numpy as np

from numdiff.analysis.models import Analysis
from numdiff.analysis.records import (
    EventStats,
    GapRowModel,
    GapSection,
    Histogram,
    ProfileBlock,
    ProfileSummary,
    TensorStats,
)

KINDS = ("conv2d", "batch_norm", "relu", "linear", "add", "permute", "softmax", "layer_norm")


def synthetic_analysis(n: int = 1000, seed: int = 0) -> Analysis:
    rng = np.random.default_rng(seed)
    rows, events = [], []
    bad = (2 * n) // 3
    for i in range(n):
        kind = KINDS[i % len(KINDS)]
        op = f"{kind}_{i}"
        snr = float(140 - 0.01 * i + rng.normal(0, 1)) if i < bad else float(35 - 0.005 * (i - bad) + rng.normal(0, 1))
        mse = float(10 ** (-snr / 10))
        counts = rng.integers(0, 500, 24).tolist()
        edges = np.linspace(-1e-3, 1e-3, 25).tolist()
        trace = (f'File "/home/user/model.py", line {100 + i % 50}, in forward\n    x = self.block{i // 8}(x)\n'
                 f'  File "/usr/lib/python3/site-packages/torch/nn/modules/{kind}.py", line 10, in forward\n    return F.{kind}(x)')
        stats = TensorStats(dtype="float32", shape=[[1, 64, 28, 28]], numel=50176, min=-3.0, max=4.0, mean=0.1, std=1.0)
        rows.append(GapRowModel(
            index=i, aot_debug_handle=[i + 1], aot_ops=[op], runtime_ops=[f"native_call_{kind}.out"],
            runtime_debug_handle=[i + 1], snr=[snr], mse=[mse], l1=[mse ** 0.5], matched=True, match="sole",
            match_explanation="the runtime logged a one-element list for this debug handle; its element is compared",
            module=f"blocks.{i // 8}.{kind}", source_line=f"model.py:{100 + i % 50} forward: x = self.block{i // 8}(x)",
            stack_trace=trace, max_abs_error=float(mse ** 0.5 * 4), aot_stats=stats, runtime_stats=stats,
            error_histogram=Histogram(edges=edges, counts=counts)))
        dur = float(abs(rng.normal(0.05, 0.02)))
        events.append(EventStats(
            index=i, name=f"native_call_{kind}.out", runs=3, p10=dur * 0.9, p50=dur, p90=dur * 1.1, avg=dur,
            min=dur * 0.9, max=dur * 1.1, durations=[dur * 0.9, dur, dur * 1.1], start_us=[i * 60.0, 1e5 + i * 60.0, 2e5 + i * 60.0],
            op_types=[f"aten.{kind}.default"], debug_handles=[i + 1], module=f"blocks.{i // 8}.{kind}",
            is_delegated_op=False))
    return Analysis(
        numdiff_version="0.1.0", created_utc="2026-01-01T00:00:00+00:00", labels={"model": f"synthetic-{n}"},
        profile=ProfileSummary(time_unit="ms", blocks=[ProfileBlock(name="Execute", runs=3, events=events)]),
        gap=GapSection(graph_name="exported_program", rows=rows, match_counts={"sole": n},
                       match_explanation={"sole": rows[0].match_explanation or ""}))
