"""The fleet view of a batch: which op diverges on which device, and what it costs there.

Read from ``OUT_DIR/ops.parquet`` and ``runs.parquet`` (``numdiff batch``), grouped by one label
(``device`` by default). An op *diverges* in a run when its culprit verdict says the op itself
computes something different (``suspicious`` or ``broken``); when culprit localization was not run,
when its SNR is below the report's noise floor instead. Per op × group: runs, runs diverging,
median and worst SNR, median latency p50. The HTML report uses the run report's styles and draws
heat maps of op × group (share of runs diverging, annotated with the median SNR; latency p50).

A run that may have used other graph inputs than the ETRecord's representative ones (``runs.parquet``'s
``inputs_in_doubt``) keeps its culprit verdicts, which replay each op on the device's own values, but
the SNRs of its rows in doubt (``ops.parquet``'s ``snr_in_doubt``: every row, or in a program of
several methods the doubted methods' rows, by :mod:`numdiff.analysis.doubt`) compare the device with a
reference run on other inputs: they are left out of the medians (and so of the outlier rule), and the
runs are counted per group in :attr:`FleetSummary.runs_in_doubt` and said.
"""

from __future__ import annotations

import html
import math
import os
from dataclasses import dataclass, field
from collections.abc import Callable
from importlib import resources
from typing import TYPE_CHECKING

from numdiff._core.advice import INPUTS_HINT
from numdiff.errors import InputError, UsageError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Cell", "FleetSummary", "load_tables", "render_fleet_html", "summarize", "text_summary", "write_fleet_html"]

DIVERGING_VERDICTS = ("suspicious", "broken")


@dataclass(frozen=True, slots=True)
class Cell:
    """One op on one group of runs."""

    runs: int
    diverging: int
    snr_median_db: float | None
    snr_min_db: float | None
    latency_p50_ms: float | None

    @property
    def share(self) -> float:
        return self.diverging / self.runs if self.runs else 0.0


@dataclass(frozen=True, slots=True)
class FleetSummary:
    """Ops (execution order) × groups (values of the ``by`` label), with per-group run counts."""

    by: str
    ops: list[str]
    groups: list[str]
    cells: dict[tuple[str, str], Cell]
    runs_ok: dict[str, int]
    runs_failed: dict[str, int]
    failures: list[tuple[str, str, str]]  # (run, group, error)
    #: Per group, the ok runs whose SNRs are left out (they may have used other graph inputs).
    runs_in_doubt: dict[str, int] = field(default_factory=dict)

    def in_doubt_note(self) -> str | None:
        """The line that says which runs' SNRs were left out, else None."""
        n = sum(self.runs_in_doubt.values())
        if not n:
            return None
        where = ", ".join(f"{g}: {k}" for g, k in self.runs_in_doubt.items() if k)
        return (f"{n} run(s) may have used other graph inputs than the ETRecord's representative ones ({where}; "
                "runs.parquet's inputs_in_doubt): their SNRs compare the device with a reference run on other "
                "inputs and are left out of the medians: " + INPUTS_HINT)


def load_tables(out_dir: str | os.PathLike[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(runs, ops)`` pandas DataFrames from a batch's output folder.

    Raises:
        InputError: A table is missing or not a readable Parquet file.
    """
    try:
        import pyarrow.parquet as pq
    except ImportError as e:
        from numdiff.errors import MissingDependencyError

        raise MissingDependencyError("numdiff fleet", "pyarrow", "batch") from e
    out = []
    for name in ("runs.parquet", "ops.parquet"):
        path = os.path.join(os.fspath(out_dir), name)
        if not os.path.isfile(path):
            raise InputError(f"{path!r} does not exist\nGive the OUT_DIR that 'numdiff batch MANIFEST -o OUT_DIR' wrote.")
        try:
            out.append(pq.read_table(path).to_pandas())
        except Exception as e:  # noqa: BLE001 - pyarrow raises several types for a damaged file
            raise InputError(f"{path!r} is not a readable Parquet table ({type(e).__name__}: {e})\n"
                             "Write it again with 'numdiff batch' (finished runs are reused).") from e
    return out[0], out[1]


def _num(v: float | None) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def summarize(runs: pd.DataFrame, ops: pd.DataFrame, by: str = "device") -> FleetSummary:
    """Group the fleet tables by the label ``by``.

    Raises:
        UsageError: ``by`` is not a label column of the tables.
    """
    import pandas as pd

    labels = [c for c in runs.columns if c not in _run_columns()]
    if by not in runs.columns or by not in labels:
        raise UsageError(f"--by {by!r} is not a label of this fleet\n"
                         f"Labels in the tables: {', '.join(labels) or '(none)'}.")
    runs = runs.assign(_group=runs[by].fillna("(none)").astype(str))
    groups = sorted(runs["_group"].unique().tolist())
    ok = runs[runs["status"] == "ok"].groupby("_group").size().to_dict()
    failed = runs[runs["status"] != "ok"].groupby("_group").size().to_dict()
    failures = [(str(r["run"]), str(r["_group"]), str(r["error"])) for _, r in runs[runs["status"] != "ok"].iterrows()]
    doubt = runs["inputs_in_doubt"].notna() if "inputs_in_doubt" in runs.columns else pd.Series(False, index=runs.index)
    doubted = runs[(runs["status"] == "ok") & doubt]
    in_doubt = doubted.groupby("_group").size().to_dict()
    cells: dict[tuple[str, str], Cell] = {}
    order: list[str] = []
    if len(ops):
        ops = ops.assign(_group=ops[by].fillna("(none)").astype(str))
        verdict = ops["verdict"]
        below = ops["below_floor"].astype("boolean").fillna(False)
        ops = ops.assign(_div=verdict.isin(DIVERGING_VERDICTS).where(verdict.notna(), below).astype(bool))
        order = ops.groupby("aot_ops", sort=False)["row"].median().sort_values(kind="stable").index.tolist()
        snr = pd.to_numeric(ops["snr_db"], errors="coerce")  # +inf: identical outputs
        row_doubt = (ops["snr_in_doubt"].astype("boolean").fillna(False).astype(bool) if "snr_in_doubt" in ops.columns
                     else ops["run"].isin(set(doubted["run"])))  # tables written before the column: the whole run
        ops = ops.assign(_snr=snr.where(~row_doubt))  # NaN: left out of the medians
        for (op, group), g in ops.groupby(["aot_ops", "_group"], sort=False):
            snr = g["_snr"].dropna()
            cells[(str(op), str(group))] = Cell(
                runs=len(g), diverging=int(g["_div"].sum()), snr_median_db=_num(snr.median()) if len(snr) else None,
                snr_min_db=_num(snr.min()) if len(snr) else None,
                latency_p50_ms=_num(g["latency_p50_ms"].median()))
    return FleetSummary(by=by, ops=[str(o) for o in order], groups=[str(g) for g in groups], cells=cells,
                        runs_ok={str(k): int(v) for k, v in ok.items()},
                        runs_failed={str(k): int(v) for k, v in failed.items()}, failures=failures,
                        runs_in_doubt={str(k): int(v) for k, v in in_doubt.items()})


def _run_columns() -> frozenset[str]:
    """Columns of runs.parquet that are not labels."""
    from numdiff.batch.tables import RUNS_COLUMNS

    return frozenset({"run", *(name for name, _ in RUNS_COLUMNS)})


def _fmt(v: float | None, digits: int = 1) -> str:
    if v is None:
        return "-"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:.{digits}f}"


def _latency(v: float | None) -> str:
    return "-" if v is None else f"{v:.4g}"


def text_summary(s: FleetSummary) -> str:
    """The per-op × group view as plain text tables (divergence and SNR; latency p50)."""
    from tabulate import tabulate

    runs = [f"{s.runs_ok.get(g, 0)} ok" + (f", {s.runs_failed[g]} failed" if s.runs_failed.get(g) else "")
            + (f", {s.runs_in_doubt[g]} other inputs?" if s.runs_in_doubt.get(g) else "") for g in s.groups]
    head = ["op", *s.groups]
    div = [[op, *(_div_cell(s.cells.get((op, g))) for g in s.groups)] for op in s.ops]
    lat = [[op, *(_latency(c.latency_p50_ms) if (c := s.cells.get((op, g))) else "-" for g in s.groups)] for op in s.ops]
    lines = [f"runs per {s.by}:", tabulate([runs], headers=s.groups, tablefmt="simple"), "",
             f"diverging runs / median SNR dB, per op × {s.by} (! = the op diverges in some runs):",
             tabulate(div, headers=head, tablefmt="simple", disable_numparse=True), "",
             f"latency p50 ms (median over runs), per op × {s.by}:",
             tabulate(lat, headers=head, tablefmt="simple", disable_numparse=True)]
    if (note := s.in_doubt_note()) is not None:
        lines[2:2] = ["", note]
    lines += _device_by_device(s)
    diverging = [(op, g, c) for op in s.ops for g in s.groups if (c := s.cells.get((op, g))) and c.diverging]
    if diverging:
        lines += ["", "diverging:"]
        lines += [f"  {op} on {s.by}={g}: {c.diverging}/{c.runs} runs (median SNR {_fmt(c.snr_median_db)} dB)"
                  for op, g, c in diverging]
    if s.failures:
        lines += ["", f"{len(s.failures)} run(s) failed:"]
        lines += [f"  {run} ({s.by}={g}): {err}" for run, g, err in s.failures[:20]]
        if len(s.failures) > 20:
            lines.append(f"  ... and {len(s.failures) - 20} more (see runs.parquet)")
    return "\n".join(lines)


def _device_by_device(s: FleetSummary) -> list[str]:
    """The {by} × {by} view: the outlier per op, and per pair of groups the ops they disagree on."""
    from tabulate import tabulate

    from numdiff.report.device_outliers import outliers, pair_matrix

    if len(s.groups) < 2 or not s.ops:
        return []
    found = outliers(s.ops, s.groups, s.cells, s.by)
    lines = ["", f"outlier per op (the {s.by} whose op departs from every other {s.by}'s):"]
    lines += [f"  {o.op}: {s.by}={o.group} ({o.reason})" for o in found] or [f"  none: no {s.by} stands alone on any op"]
    pairs = pair_matrix(s.ops, s.groups, s.cells)
    grid = [[g, *("" if g == h else str(len(pairs[(g, h)])) for h in s.groups)] for g in s.groups]
    lines += ["", f"ops on which two {s.by}s disagree ({s.by} × {s.by}; diverging in one and not the other, or median "
              "SNR 6 dB or more apart):", tabulate(grid, headers=[s.by, *s.groups], tablefmt="simple",
                                                   disable_numparse=True)]
    return lines


def _div_cell(c: Cell | None) -> str:
    if c is None:
        return "-"
    return f"{'!' if c.diverging else ' '}{c.diverging}/{c.runs} {_fmt(c.snr_median_db)}"


# --- HTML -----------------------------------------------------------------------------------------

def _heatmap(s: FleetSummary, value: Callable[[Cell | None], float], note: Callable[[Cell | None], str],
             title: str, cmap: str, salt: str) -> str:
    import numpy as np

    from numdiff.report.charts import figure_svg, plain_text, pyplot

    plt = pyplot()
    grid = np.array([[value(s.cells.get((op, g))) for g in s.groups] for op in s.ops], dtype=float)
    with plain_text():  # op names and label values come from the fleet's files: a `$` there is no math text
        fig, ax = plt.subplots(figsize=(max(5.0, 1.0 + 1.1 * len(s.groups)), max(2.2, 0.9 + 0.42 * len(s.ops))),
                               dpi=96)
        masked = np.ma.masked_invalid(grid)
        image = ax.imshow(masked, cmap=cmap, aspect="auto", vmin=0.0 if salt.endswith("div") else None,
                          vmax=1.0 if salt.endswith("div") else None)
        ax.set_xticks(range(len(s.groups)), s.groups, rotation=30, ha="right", fontsize=8)
        ax.set_yticks(range(len(s.ops)), [o if len(o) <= 40 else o[:39] + "…" for o in s.ops], fontsize=8)
        for i, op in enumerate(s.ops):
            for j, g in enumerate(s.groups):
                text = note(s.cells.get((op, g)))
                if text:
                    dark = bool(np.isfinite(grid[i, j])) and float(image.norm(grid[i, j])) > 0.6
                    ax.text(j, i, text, ha="center", va="center", fontsize=7, color="#fff" if dark else "#111")
        fig.colorbar(image, ax=ax, label=title, fraction=0.04, pad=0.02)
        ax.set_xlabel(s.by)
        fig.tight_layout()
        return figure_svg(fig, "numdiff-fleet-" + salt).svg


def render_fleet_html(s: FleetSummary, title: str = "fleet") -> str:
    """The fleet report as one self-contained HTML document."""
    try:
        import jinja2
        import matplotlib  # noqa: F401
    except ImportError as e:
        from numdiff.errors import MissingDependencyError

        raise MissingDependencyError("the fleet HTML report", e.name or "jinja2", "report") from e
    from numdiff.report.html import content_security_policy, template_text

    nan = float("nan")
    div_svg = _heatmap(s, lambda c: nan if c is None else c.share,
                       lambda c: "" if c is None else f"{c.diverging}/{c.runs}\n{_fmt(c.snr_median_db)} dB",
                       "share of runs diverging", "Reds", "div") if s.ops else None
    lat_svg = _heatmap(s, lambda c: nan if c is None or c.latency_p50_ms is None else c.latency_p50_ms,
                       lambda c: "" if c is None else _latency(c.latency_p50_ms), "latency p50 (ms)", "Blues",
                       "lat") if s.ops else None
    template = (resources.files("numdiff.batch") / "templates" / "fleet.html.j2").read_text(encoding="utf-8")
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    diverging = [(op, g, c) for op in s.ops for g in s.groups if (c := s.cells.get((op, g))) and c.diverging]
    from numdiff.report.device_outliers import outliers, pair_matrix

    # one style sheet, allowed by its hash (no 'unsafe-inline'); the heat maps carry no inline CSS
    css = template_text("report.css").replace("\r\n", "\n") + (
        "\n.heat svg { width: 100%; height: auto; display: block; }\ntd.div { color: var(--bad); font-weight: 600; }\n")
    return env.from_string(template).render(
        title=title, s=s, css=css, csp=content_security_policy([], [css]), div_svg=div_svg, lat_svg=lat_svg,
        diverging=diverging, outliers=outliers(s.ops, s.groups, s.cells, s.by), pairs=pair_matrix(s.ops, s.groups, s.cells),
        fmt=_fmt, latency=_latency, total_ok=sum(s.runs_ok.values()), total_failed=sum(s.runs_failed.values()),
        escape=html.escape)


def write_fleet_html(s: FleetSummary, path: str | os.PathLike[str], title: str = "fleet") -> None:
    """Write the fleet report to ``path`` (UTF-8; through a private temporary file, replaced at the end)."""
    from numdiff._core.files import atomic_write

    atomic_write(path, render_fleet_html(s, title))
