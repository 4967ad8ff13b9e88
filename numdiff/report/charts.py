"""Charts of the HTML report, drawn server-side by matplotlib as inline SVG.

Each chart comes with its axes geometry (where the x axis starts and ends, as fractions of the
image width, and the data range it spans) so the page's script can map the mouse to a layer or
event for tooltips and clicks without a JavaScript plotting library.

Labels come from the files (a module path, a delegate name, a manifest label): every chart is drawn
under :func:`plain_text`, so a ``$...$`` in one is shown as written, never parsed as math text
(``$\\nosuch{$`` would otherwise fail the whole report).
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["Chart", "error_chart", "figure_svg", "latency_chart", "module_chart", "plain_text", "presentation_attributes",
           "pyplot", "shorten"]

BLUE, RED, ORANGE, GREY, PURPLE, TEAL = "#1976d2", "#c62828", "#ef6c00", "#888888", "#8e24aa", "#00897b"


@dataclass(frozen=True, slots=True)
class Chart:
    """An SVG image and where its x axis lies (fractions of the width) and what it spans."""

    svg: str
    x0: float
    x1: float
    xmin: float
    xmax: float


def pyplot() -> ModuleType:
    """``matplotlib.pyplot`` on the non-interactive Agg backend (charts are drawn to SVG, never shown)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


@contextmanager
def plain_text() -> Iterator[None]:
    """Inside, matplotlib draws every text as written: ``$`` never starts math text.

    Use it around the whole of a chart's drawing (as a decorator, ``@plain_text()``): text artists
    take the setting when they are made, and ``tight_layout`` already lays the labels out.
    """
    import matplotlib

    with matplotlib.rc_context({"text.parse_math": False}):
        yield


def figure_svg(fig: Figure, salt: str) -> Chart:
    """``fig`` as inline SVG (ids salted with ``salt``, no date: the same figure gives the same text), then closed.

    Every text of the figure is drawn as written (see :func:`plain_text`), even one made outside it.
    """
    import matplotlib
    from matplotlib.text import Text

    for artist in fig.findobj(Text):
        artist.set_parse_math(False)
    ax = fig.axes[0]
    box = ax.get_position()
    lo, hi = ax.get_xlim()
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt, "text.parse_math": False}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    pyplot().close(fig)
    text = buf.getvalue()
    text = presentation_attributes(text[text.index("<svg"):])
    return Chart(svg=text, x0=float(box.x0), x1=float(box.x1), xmin=float(lo), xmax=float(hi))


#: matplotlib's SVG sets these defaults for every element in a ``<style>`` element of its own.
_SVG_DEFAULTS = re.compile(r"\s*<defs>\s*<style type=\"text/css\">\*\{stroke-linejoin: round; stroke-linecap: butt\}</style>\s*</defs>")
_START_TAG = re.compile(r"<[A-Za-z][^<>]*>")
_STYLE = re.compile(r'\sstyle="([^"]*)"')


def _attribute_name(name: str) -> str:
    return name if re.fullmatch(r"[a-z][a-z-]*", name) else ""


def presentation_attributes(svg: str) -> str:
    """matplotlib's SVG without inline CSS, so a page's Content-Security-Policy needs no ``'unsafe-inline'``.

    Every ``style="fill: #fff; stroke-width: 0.8"`` becomes SVG presentation attributes
    (``fill="#fff" stroke-width="0.8"``; they are attributes, not styles, for the CSP), and the
    ``<style>*{stroke-linejoin: round; stroke-linecap: butt}</style>`` matplotlib adds becomes those
    two attributes on the root ``<svg>``, inherited by every element that does not set its own (an
    element's own attribute then wins, as its inline style won over the ``*`` rule).

    Example:
        >>> presentation_attributes('<svg><path d="M 0 0" style="fill: #ffffff; stroke-width: 0.8"/></svg>')
        '<svg><path d="M 0 0" fill="#ffffff" stroke-width="0.8"/></svg>'
    """
    svg, defaults = _SVG_DEFAULTS.subn("", svg, count=1)

    def tag(match: re.Match[str]) -> str:
        text = match.group(0)
        style = _STYLE.search(text)
        if style is None:
            return text
        attrs: dict[str, str] = {}
        for declaration in style.group(1).split(";"):
            name, _, value = declaration.partition(":")
            name = _attribute_name(name.strip())
            if name and value.strip():
                attrs[name] = value.strip()
        text = text[:style.start()] + text[style.end():]
        for name in attrs:  # the style won over an attribute of the same name: it replaces it
            text = re.sub(rf'\s{name}="[^"]*"', "", text)
        end = len(text) - (2 if text.endswith("/>") else 1)
        return text[:end] + "".join(f' {k}="{v}"' for k, v in attrs.items()) + text[end:]

    svg = _START_TAG.sub(tag, svg)
    if defaults:
        svg = svg.replace("<svg ", '<svg stroke-linejoin="round" stroke-linecap="butt" ', 1)
    return svg


#: Every position gets its name on the axis up to this many; beyond, matplotlib picks integer positions.
ALL_NAMES_UP_TO = 30


def shorten(name: str, width: int = 22) -> str:
    """``name`` cut in the middle to at most ``width`` characters (both ends tell ops apart: ``aten.conv…_12``)."""
    if len(name) <= width:
        return name
    head = (width - 1) // 2
    return name[:head] + "…" + name[len(name) - (width - 1 - head):]


def _name_axis(ax: Axes, names: dict[int, str], lo: int, hi: int) -> None:
    """The x axis at positions ``lo..hi`` labelled with the (shortened) names, never bare or fractional indices.

    One or two positions get a wider range (a lone point in the middle, not an axis from -0.5 to 0.5);
    the page's tooltip gives the full name under the mouse.
    """
    from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator

    pad = 1.0 if hi - lo < 2 else 0.5
    ax.set_xlim(lo - pad, hi + pad)
    if len(names) <= ALL_NAMES_UP_TO:
        ax.xaxis.set_major_locator(FixedLocator(sorted(names)))
    else:
        ax.xaxis.set_major_locator(MaxNLocator(nbins=ALL_NAMES_UP_TO // 2, integer=True))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: shorten(names.get(int(round(v)), ""))
                                               if abs(v - round(v)) < 1e-9 else ""))
    ax.tick_params(axis="x", labelrotation=35, labelsize=7)
    for label in ax.get_xticklabels():
        label.set_horizontalalignment("right")


def _finite(v: float | str | None) -> float | None:
    if v is None or isinstance(v, str):
        return None
    return float(v) if math.isfinite(v) else None


def _snr(v: float | str | None, cap: float) -> float:
    if v == "inf":
        return cap
    if v is None or v in ("nan", "-inf"):
        return math.nan
    return float(v)


@plain_text()
def error_chart(rows: list[dict[str, Any]]) -> Chart:
    """SNR along execution order: accumulated (runtime vs reference), local when known, noise floor."""
    plt = pyplot()
    finite = [f for r in rows for f in [_finite(r["snr"])] if f is not None]
    floors = [r["floor"] for r in rows if r["floor"] is not None]
    cap = max(finite + floors + [0.0]) + 10
    x = [r["i"] for r in rows]
    y = [_snr(r["snr"], cap) for r in rows]
    fig, ax = plt.subplots(figsize=(12, 3.4), dpi=96)
    ax.plot(x, y, "-", color=BLUE, lw=1.2, marker="o" if len(rows) <= 200 else None, ms=3,
            label="accumulated SNR (runtime vs reference)")
    if any(r["local"] is not None for r in rows):
        ax.plot(x, [_snr(r["local"], cap) for r in rows], "-", color=ORANGE, lw=1.0,
                label="local SNR (op on the runtime's inputs)")
    if floors:
        ax.step(x, [math.nan if r["floor"] is None else r["floor"] for r in rows], where="mid", color=GREY,
                ls=":", lw=1.2, label="noise floor")
    below = [(r["i"], v) for r, v in zip(rows, y) if r["floor"] is not None and not math.isnan(v) and v < r["floor"]]
    if below:
        ax.scatter([b[0] for b in below], [b[1] for b in below], s=14, color=RED, zorder=3, label="below the floor")
    culprits = [(r["i"], v) for r, v in zip(rows, y) if r["culprit"] and not math.isnan(v)]
    if culprits:
        ax.scatter([c[0] for c in culprits], [c[1] for c in culprits], s=90, marker="X", color=RED, edgecolor="white",
                   zorder=4, label="culprit (local error beyond noise)")
    if any(r["snr"] == "inf" for r in rows):
        ax.axhline(cap, color=GREY, lw=0.5)
        ax.annotate("identical (∞)", (x[0], cap), fontsize=8, color=GREY, va="bottom")
    ax.set_xlabel("op (execution order)")
    ax.set_ylabel("SNR dB (higher is better)")
    _name_axis(ax, {r["i"]: r["op"] or f"#{r['i'] + 1}" for r in rows}, min(x), max(x))
    ax.grid(alpha=0.25)
    ax.legend(fontsize=8, loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=5, frameon=False, borderaxespad=0.2)
    fig.tight_layout()
    return figure_svg(fig, "numdiff-error")


@plain_text()
def latency_chart(events: list[dict[str, Any]], unit: str) -> Chart:
    """p50 of each given event in runtime order (one bar each; delegate-internal events in purple)."""
    plt = pyplot()
    n = len(events)
    fig, ax = plt.subplots(figsize=(6.4, 3.6), dpi=96)
    edges = [k - 0.5 for k in range(n + 1)]
    outside = [0.0 if e["delegated"] else float(e["p50"]) for e in events]
    inside = [float(e["p50"]) if e["delegated"] else 0.0 for e in events]
    if n:
        ax.stairs(outside, edges, fill=True, color=BLUE, label="runtime op / delegate call")
        if any(inside):
            ax.stairs(inside, edges, fill=True, color=PURPLE, label="inside a delegate")
        _name_axis(ax, {k: str(e["name"]) for k, e in enumerate(events)}, 0, n - 1)
        ax.legend(fontsize=8, frameon=False)
    ax.set_xlabel("op or delegate call (runtime order)")
    ax.set_ylabel(unit)
    ax.grid(alpha=0.25, axis="y")
    fig.tight_layout()
    return figure_svg(fig, "numdiff-latency")


@plain_text()
def module_chart(modules: list[dict[str, Any]], unit: str, top: int = 20) -> Chart:
    """Sum of p50 per source module (a delegate call counts for its delegate), largest first."""
    plt = pyplot()
    shown = modules[:top][::-1]
    fig, ax = plt.subplots(figsize=(6.4, max(2.0, 0.9 + 0.22 * len(shown))), dpi=96)
    labels = [m["module"] if len(m["module"]) <= 40 else "…" + m["module"][-39:] for m in shown]
    ax.barh(range(len(shown)), [m["p50"] for m in shown], color=TEAL)
    ax.set_yticks(range(len(shown)), labels, fontsize=8)
    ax.set_xlabel(unit + (f" (top {top} of {len(modules)})" if len(modules) > top else ""))
    ax.grid(alpha=0.25, axis="x")
    fig.tight_layout()
    return figure_svg(fig, "numdiff-modules")
