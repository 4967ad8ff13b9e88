"""Views of an analysis: text tables, the HTML report, charts, the trace, the explorer overlay, the CI diff.

Each view reads a saved :class:`~numdiff.analysis.models.Analysis` (re-exported here) or the
library's own results; nothing in this package computes a latency or an error of its own.

Example:
    >>> from numdiff.report import Analysis  # doctest: +SKIP
    >>> analysis = Analysis.from_files(etdump, etrecord, debug_buffer, labels={"device": "pixel8"})  # doctest: +SKIP
    >>> analysis.save("run.json")  # doctest: +SKIP
"""

from __future__ import annotations

from numdiff.report.html import render_html, write_html
from numdiff.analysis.models import Analysis
from numdiff.analysis.records import FORMAT_VERSION

__all__ = ["FORMAT_VERSION", "Analysis", "render_html", "write_html"]
