"""``Inspector.get_op_list``: the ops of one event block, grouped, with counts and latency statistics.

The reference declares ``get_op_list(event_block, show_delegated_ops=True) -> {op: [Event]}`` and
returns an empty dict. numdiff fills it: :class:`OpList` *is* that dict (so code written against
the signature works) and adds :meth:`OpList.to_dataframe`, one row per op with its count and
latency statistics.

Grouping: an event is filed under the op that ran, its ``name`` (``"native_call_addmm.out"``,
``"DELEGATE_CALL"``, a delegate's ``"Convolution (NHWC, F32) IGEMM #1"`` with the trailing
instance number `` #1`` dropped so instances of one delegate op group together). Graph
``op_types`` are not used as keys because several events can share them (a Linear's
``permute_copy`` and ``addmm`` both list both), which would count a duration twice.
``OPERATOR_CALL`` events (a repeat of the op before them) and the runtime's framework steps
(``Method::execute``...) are left out.

Example:
    >>> ops = inspector.get_op_list("Execute")  # doctest: +SKIP
    >>> ops.to_dataframe()[["op", "count", "total_avg", "share"]]  # doctest: +SKIP
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np
import pandas as pd

from numdiff._core.events import FRAMEWORK_EVENTS, OPERATOR_CALL
from numdiff.profile.events import Event

__all__ = ["OpList", "op_key", "op_list"]

_INSTANCE = re.compile(r" #\d+$")

COLUMNS = ("op", "count", "runs", "total_avg", "avg", "p50", "min", "max", "share", "delegated",
           "delegate_backend_name", "op_types")


def op_key(event: Event) -> str:
    """The op an event is filed under: its name, without a delegate op's trailing `` #<n>``."""
    return _INSTANCE.sub("", event.name) if event.is_delegated_op else event.name


class OpList(dict[str, list[Event]]):
    """``{op: [events]}`` in first-seen order, plus a statistics table.

    Attributes:
        unit: The time unit of the durations (the Inspector's target time scale), e.g. ``"ms"``.
    """

    def __init__(self, groups: dict[str, list[Event]], unit: str) -> None:
        super().__init__(groups)
        self.unit = unit

    def to_dataframe(self) -> pd.DataFrame:
        """One row per op, most expensive first.

        Columns: ``op``; ``count`` (events, i.e. instances of the op in the block); ``runs``
        (samples per event); ``total_avg`` (sum over the op's events of each event's average
        duration: what the op costs per run); ``avg``, ``p50``, ``min``, ``max`` over all samples of
        all its events; ``share`` (``total_avg`` over the block's total, 0..1); ``delegated``;
        ``delegate_backend_name``; ``op_types`` (the graph ops its events map to). Durations are
        in :attr:`unit`; events without profiling data count in ``count`` only (NaN durations).
        """
        rows = []
        for op, events in self.items():
            timed = [e.perf_data for e in events if e.perf_data is not None and len(e.perf_data.raw)]
            samples = np.asarray([x for p in timed for x in p.raw], dtype=np.float64)
            total = float(sum(p.avg for p in timed)) if timed else float("nan")
            op_types: list[str] = []
            for e in events:
                op_types += [t for t in e.op_types if t not in op_types]
            backends = {e.delegate_backend_name for e in events if e.delegate_backend_name}
            rows.append({
                "op": op,
                "count": len(events),
                "runs": max((len(p.raw) for p in timed), default=0),
                "total_avg": total,
                "avg": float(samples.mean()) if samples.size else float("nan"),
                "p50": float(np.percentile(samples, 50)) if samples.size else float("nan"),
                "min": float(samples.min()) if samples.size else float("nan"),
                "max": float(samples.max()) if samples.size else float("nan"),
                "delegated": any(bool(e.is_delegated_op) for e in events),
                "delegate_backend_name": ", ".join(sorted(backends)) or None,
                "op_types": op_types,
            })
        df = pd.DataFrame(rows, columns=[c for c in COLUMNS if c != "share"])
        block_total = float(np.nansum(df["total_avg"])) if len(df) else 0.0
        df.insert(COLUMNS.index("share"), "share", df["total_avg"] / block_total if block_total else np.nan)
        df = df.sort_values("total_avg", ascending=False, na_position="last", kind="stable").reset_index(drop=True)
        df.attrs["unit"] = self.unit
        return df


def op_list(events: Iterable[Event], show_delegated_ops: bool | None, unit: str) -> OpList:
    """Group ``events`` by :func:`op_key`.

    Args:
        events: The events of the block(s), in runtime order.
        show_delegated_ops: Include the ops that ran inside a delegate (each delegate's
            ``DELEGATE_CALL`` is always listed). None counts as True, as in the reference's default.
        unit: The durations' time unit, for :attr:`OpList.unit`.
    """
    groups: dict[str, list[Event]] = {}
    for event in events:
        if event.name in FRAMEWORK_EVENTS or event.name == OPERATOR_CALL:  # runtime steps, not ops
            continue
        if event.is_delegated_op and show_delegated_ops is False:
            continue
        groups.setdefault(op_key(event), []).append(event)
    return OpList(groups, unit)
