"""The per-layer gap as something to look at: one line per layer, the user's own source line.

Stack traces in an ETRecord run through torch internals; what a user needs is the line of *their*
model that produced the op. ``user_frame`` picks the last frame outside torch and site-packages.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

__all__ = ["format_gap", "gap_summary", "render_gap_table", "user_frame", "worst_rows"]

_FRAME = re.compile(r'File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<fn>[^\n]+)\n(?P<code>[^\n]*)')
_LIBRARY = re.compile(r"(site-packages|dist-packages)[/\\]|[/\\]torch[/\\]|<eval_with_key>|^<")

#: How to read each metric: higher is better (SNR, cosine) or lower is better (errors).
HIGHER_IS_BETTER = {"SNRComparator": True, "CosineSimilarityComparator": True}


def user_frame(stack_trace: str | None) -> str | None:
    """``"model.py:42 forward: y = self.fc(x)"`` for the last frame outside libraries, or None."""
    if not stack_trace:
        return None
    frames = list(_FRAME.finditer(stack_trace))
    mine = [f for f in frames if not _LIBRARY.search(f.group("path"))] or frames
    if not mine:
        return None
    f = mine[-1]
    name = re.split(r"[/\\]", f.group("path"))[-1]
    return f"{name}:{f.group('line')} {f.group('fn').strip()}: {f.group('code').strip()}"


def format_gap(gap: Any) -> str:
    values = gap if isinstance(gap, (list, tuple)) else [gap]
    return ", ".join("nan" if math.isnan(v) else ("inf" if v == math.inf else "-inf" if v == -math.inf else f"{v:.4g}")
                     for v in (float(x) for x in values))


def _shape(value: Any) -> str:
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"{str(value.dtype).replace('torch.', '')}{list(value.shape)}"
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(_shape(v) for v in value) + ")"
    return type(value).__name__


def _score(gap: Any, higher_is_better: bool) -> float:
    """One number per row for ranking: the worst element (NaN ranks worst of all)."""
    values = [float(x) for x in (gap if isinstance(gap, (list, tuple)) else [gap])]
    if not values or any(math.isnan(v) for v in values):
        return -math.inf if higher_is_better else math.inf
    return min(values) if higher_is_better else max(values)


def gap_summary(df: pd.DataFrame, module_paths: Mapping[str, str] | None = None) -> pd.DataFrame:
    """A compact view of a gap DataFrame: handle, ops, shapes, gap, module, source line."""
    rows = []
    for _, r in df.iterrows():
        traces: Mapping[str, str | None] = r.get("stacktraces") or {}
        source = next((s for s in (user_frame(traces.get(op)) for op in r["aot_ops"]) if s), None)
        module = next((module_paths[op] for op in r["aot_ops"] if module_paths and op in module_paths), None)
        row = {
            "handle": ",".join(str(h) for h in r["aot_debug_handle"]),
            "aot_ops": ", ".join(r["aot_ops"]),
            "runtime_ops": ", ".join(r["runtime_ops"]),
            "shape": _shape(r["aot_intermediate_output"]),
            "gap": format_gap(r["gap"]),
            "module": module or "",
            "source": source or "",
        }
        if "note" in r and isinstance(r["note"], str):
            row["note"] = r["note"]
        rows.append(row)
    return pd.DataFrame(rows)


def worst_rows(df: pd.DataFrame, metric: str, n: int | None = None) -> pd.DataFrame:
    """Rows of ``df`` sorted worst first for ``metric`` (a comparator class name)."""
    higher = HIGHER_IS_BETTER.get(metric, False)
    scores = [_score(g, higher) for g in df["gap"]]
    order = sorted(range(len(scores)), key=lambda i: scores[i], reverse=not higher)
    out = df.iloc[order]
    return out if n is None else out.head(n)


def render_gap_table(df: pd.DataFrame, metric: str = "", module_paths: Mapping[str, str] | None = None,
                     columns: Sequence[str] | None = None) -> str:
    """The gap as a text table (runtime order), for terminals and test failures."""
    from tabulate import tabulate

    summary = gap_summary(df, module_paths)
    if columns is not None and len(summary):
        summary = summary[[c for c in columns if c in summary.columns]]
    title = f"{len(df)} layers compared" + (f" ({metric})" if metric else "")
    if not len(summary):
        return title
    return title + "\n" + str(tabulate(summary, headers="keys", tablefmt="simple", showindex=False, maxcolwidths=60))
