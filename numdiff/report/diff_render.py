"""Text forms of a :class:`~numdiff.analysis.diff.DiffReport`: a terminal table, Markdown, JSON; and the
report read back from that JSON (:func:`report_from_json`: what ``numdiff runs compare`` gets from a server)."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

from tabulate import tabulate

from numdiff.analysis.diff import DiffReport, GateThresholds, OpDelta

__all__ = ["render_diff", "report_from_json"]


def _n(v: float | None, digits: int = 4) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return f"{v:.{digits}g}"


def _signed(v: float | None) -> str:
    """A change with its sign ("+12.34", "-3", "0"), 4 significant digits."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return "0" if v == 0 else f"{v:+.4g}"


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{v:+.1f}%"


def _share(v: float | None) -> str:
    return "—" if v is None else f"{100 * v:.0f}%"


def _short(key: str) -> str:
    ops = key.split(" + ")
    return key if len(ops) <= 3 else f"{ops[0]} … {ops[-1]} ({len(ops)} ops)"


_OP_HEADERS = ["kind", "op", "category", "base", "new", "change"]


def _op_rows(ops: list[OpDelta], verdict: bool = True) -> list[list[str]]:
    """One row per op; with ``verdict`` a last column saying ``REGRESSION`` or ``ok`` (headed "verdict")."""
    return [[d.kind, _short(d.key), d.category,
             _n(d.base) + (" dB" if d.kind == "error" else " µs"), _n(d.new) + (" dB" if d.kind == "error" else " µs"),
             (f"{d.delta:+.2f} dB" if d.kind == "error" and d.delta is not None else
              f"{_signed(d.delta)} µs ({_pct(d.delta_pct)})" if d.delta is not None else "—")]
            + (["REGRESSION" if d.regression else "ok"] if verdict else []) for d in ops]


def _sections(report: DiffReport) -> list[tuple[str, list[str], list[list[str]]]]:
    t = report.totals
    out = [("Total time in top-level events", ["base", "new", "change", "verdict"],
            [[f"{_n(t['base_us'])} µs", f"{_n(t['new_us'])} µs", f"{_signed(t['delta_us'])} µs ({_pct(t['delta_pct'])})",
              "REGRESSION" if t["regression"] else "ok"]])]
    regressions = [d for d in report.ops if d.regression]
    if regressions:
        out.append(("Regressions", _OP_HEADERS, _op_rows(regressions, verdict=False)))  # every row is one
    out.append(("By op category", ["category", "timed ops", "layers", "base µs", "new µs", "change", "worst SNR base",
                                   "worst SNR new", "regressions"],
                [[c["category"], str(c["ops"]), str(c["layers"]), _n(c["base_us"]), _n(c["new_us"]), _pct(c["delta_pct"]),
                  _n(c["worst_snr_base"]), _n(c["worst_snr_new"]), str(c["regressions"])] for c in report.categories]))
    if report.delegates:
        out.append(("By delegate (coverage: share of top-level ops and time inside the delegate)",
                    ["delegate", "ops inside base", "ops inside new", "time inside base", "time inside new",
                     "base µs", "new µs"],
                    [[d["delegate"], _share(d["base_op_share"]), _share(d["new_op_share"]), _share(d["base_time_share"]),
                      _share(d["new_time_share"]), _n(d["base_us"]), _n(d["new_us"])] for d in report.delegates]))
    return out


def _headline(report: DiffReport) -> str:
    n = len(report.regressions)
    if report.error_not_compared is not None:
        verdict = "FAILED, layers not compared: a run may have used other inputs" + (
            f"; {n} regression{'s' if n != 1 else ''}" if n else "")
    elif report.coverage_failures:
        verdict = "FAILED, too little compared" + (f" and {n} regression{'s' if n != 1 else ''}" if n else "")
    else:
        verdict = f"{n} regression{'s' if n != 1 else ''}" if n else "no regression"
    return verdict + (
        f" ({sum(d.kind == 'error' for d in report.ops)} layers and {sum(d.kind == 'latency' for d in report.ops)} "
        "timed ops compared)")


def _not_compared(report: DiffReport) -> list[str]:
    return [] if report.error_not_compared is None else [report.error_not_compared]


def _threshold_line(report: DiffReport) -> str:
    t = report.thresholds
    return (f"thresholds: SNR drop > {t.max_snr_drop_db:g} dB (SNR capped at {t.snr_cap_db:g} dB); latency "
            f"+{t.max_latency_increase_pct:g}% and at least +{t.min_latency_increase_us:g} µs; at least "
            f"{t.min_matched_share:.0%} of the base's ops matched")


def _labels(report: DiffReport) -> str:
    def fmt(labels: dict[str, str]) -> str:
        return ", ".join(f"{k}={v}" for k, v in labels.items()) or "(no labels)"

    return f"base: {fmt(report.labels[0])} · new: {fmt(report.labels[1])}"


def _jsonable(v: object) -> object:
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return v


def _number(v: object) -> float | None:
    """A figure of the JSON form: a number; ``null`` or the strings "inf"/"nan" that :func:`_jsonable` writes."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return None
    return None


def _figures(row: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    """``row`` with every field but ``names`` (its text) read as a figure (bools kept)."""
    return {k: v if k in names or isinstance(v, bool) else _number(v) for k, v in row.items()}


def report_from_json(data: dict[str, Any]) -> DiffReport:
    """The report that ``render_diff(report, "json")`` wrote (a server's ``diff``), to print as a table.

    Infinite and missing figures come back as ``inf``/``nan`` or ``None`` (a server writes ``null``);
    op names, categories and delegates stay text.
    """
    t = data.get("thresholds") or {}
    given = {f.name: _number(t.get(f.name)) for f in dataclasses.fields(GateThresholds)}
    thresholds = dataclasses.replace(GateThresholds(), **{k: v for k, v in given.items() if v is not None})
    ops = [OpDelta(str(o.get("kind", "")), str(o.get("key", "")), str(o.get("category", "")), _number(o.get("base")),
                   _number(o.get("new")), _number(o.get("delta")), _number(o.get("delta_pct")),
                   bool(o.get("regression"))) for o in data.get("ops") or []]
    labels = data.get("labels") or {}
    coverage = {k: (int(v.get("matched", 0)), int(v.get("base", 0))) for k, v in (data.get("coverage") or {}).items()}
    return DiffReport(thresholds, ops, [_figures(c, ("category",)) for c in data.get("categories") or []],
                      [_figures(x, ("delegate",)) for x in data.get("delegates") or []],
                      _figures(data.get("totals") or {}, ()), list(data.get("only_in_base") or []),
                      list(data.get("only_in_new") or []), (dict(labels.get("base") or {}), dict(labels.get("new") or {})),
                      list(data.get("notes") or []), coverage, list(data.get("coverage_failures") or []),
                      str(data.get("program_check", "same")),
                      None if data.get("error_not_compared") is None else str(data.get("error_not_compared")))


def render_diff(report: DiffReport, fmt: str = "table", title: str = "numdiff diff") -> str:
    """``fmt``: "table" (terminal), "markdown" (a pull-request comment) or "json"; ``title`` begins the
    first line of the table and the Markdown heading."""
    if fmt == "json":
        data = {"regressions": len(report.regressions), "thresholds": dataclasses.asdict(report.thresholds),
                "totals": report.totals, "categories": report.categories, "delegates": report.delegates,
                "ops": [dataclasses.asdict(d) for d in report.ops], "only_in_base": report.only_in_base,
                "only_in_new": report.only_in_new, "labels": {"base": report.labels[0], "new": report.labels[1]},
                "notes": report.notes, "passed": report.passed,
                "coverage": {k: {"matched": m, "base": b} for k, (m, b) in report.coverage.items()},
                "coverage_failures": report.coverage_failures, "program_check": report.program_check,
                "error_not_compared": report.error_not_compared}
        return json.dumps(_jsonable(data), indent=1, allow_nan=False)
    unmatched = ([f"only in base: {', '.join(report.only_in_base[:20])}" + (" …" if len(report.only_in_base) > 20 else "")]
                 if report.only_in_base else []) + (
                [f"only in new: {', '.join(report.only_in_new[:20])}" + (" …" if len(report.only_in_new) > 20 else "")]
                if report.only_in_new else [])
    if fmt == "markdown":
        mark = "✅" if report else "❌"
        lines = [f"### {title}: {mark} {_headline(report)}", "", _labels(report) + "  ", _threshold_line(report)]
        lines += [f"- **{failure}**" for failure in [*_not_compared(report), *report.coverage_failures]]
        lines += [f"- {note}" for note in report.notes] + [""]
        for title, headers, rows in _sections(report):
            lines += [f"#### {title}", "", tabulate(rows, headers, tablefmt="github"), ""]
        lines += ["<details><summary>every compared op</summary>", "",
                  tabulate(_op_rows(report.ops), [*_OP_HEADERS, "verdict"], tablefmt="github"),
                  "", "</details>"]
        lines += [""] + [f"- {u}" for u in unmatched] if unmatched else []
        return "\n".join(lines).rstrip() + "\n"
    lines = [f"{title}: {_headline(report)}", _labels(report), _threshold_line(report),
             *(f"FAILED: {failure}" for failure in [*_not_compared(report), *report.coverage_failures]), *report.notes]
    for title, headers, rows in _sections(report):
        lines += ["", title, tabulate(rows, headers, tablefmt="simple")]
    lines += [""] + unmatched if unmatched else []
    return "\n".join(lines).rstrip() + "\n"
