"""The HTML report: one self-contained file (styles, script, charts and data inline).

The page needs no network: the charts are SVG drawn by matplotlib when the report is written,
and the page's own small script (sorting, filtering, tooltips, per-op details) is inlined with
its styles and the analysis data.

Its Content-Security-Policy allows exactly that script and that style sheet, by their SHA-256
(:func:`content_security_policy`), never ``'unsafe-inline'``: a script or style that anything
else put in the page (a crafted label that escaped its cell) would not run. The charts carry no
inline CSS (:func:`numdiff.report.charts.presentation_attributes`), and the script styles
elements through the CSSOM only, which the policy allows.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
from importlib import resources
from typing import TYPE_CHECKING

from numdiff.errors import MissingDependencyError
from numdiff.report._view import report_data

if TYPE_CHECKING:
    from numdiff.analysis.models import Analysis

__all__ = ["content_security_policy", "notebook_html", "render_html", "template_text", "write_html"]


def template_text(name: str) -> str:
    """The text of one of the report's templates (``numdiff/report/templates/<name>``)."""
    return (resources.files("numdiff.report") / "templates" / name).read_text(encoding="utf-8")


def _script_json(data: object) -> str:
    """JSON safe inside a <script> element (no "</", "<!--" or U+2028/9 can end or confuse it)."""
    text = json.dumps(data, allow_nan=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _sha256(text: str) -> str:
    """A CSP hash source for the text of an inline ``<script>`` or ``<style>`` element."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def content_security_policy(scripts: list[str], styles: list[str]) -> str:
    """The report's policy: nothing from the network, and only these inline scripts and styles (by hash).

    Example:
        >>> content_security_policy(["run()"], [])
        "default-src 'none'; script-src 'sha256-...'; style-src 'none'; img-src data:; base-uri 'none'; form-action 'none'"
    """
    def sources(texts: list[str]) -> str:
        return " ".join(_sha256(t) for t in texts) or "'none'"

    return (f"default-src 'none'; script-src {sources(scripts)}; style-src {sources(styles)}; img-src data:; "
            "base-uri 'none'; form-action 'none'")


def _number(value: float | None) -> str:
    """A figure of the deeper-localization tables: 4 significant digits, "–" when there is none."""
    return "–" if value is None else f"{value:.4g}"


def render_html(analysis: Analysis) -> str:
    """The report as one HTML document (a string)."""
    try:
        import jinja2
        import matplotlib  # noqa: F401
    except ImportError as e:
        raise MissingDependencyError("the HTML report", e.name or "jinja2", "report") from e
    from numdiff.report.charts import error_chart, latency_chart, module_chart

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined,
                             loader=jinja2.FunctionLoader(lambda name: template_text(name)))
    env.filters["db"] = _number
    title = analysis.labels.get("model") or next((a.name for a in analysis.artifacts if a.role == "etdump"), "run")
    data = report_data(analysis)
    unit = analysis.profile.time_unit
    timed = [data["events"][k] for k in data["timed"]]
    # the HTML parser turns CR LF into LF before the browser hashes an element's text: hash what it will see
    app_js = template_text("report.js").replace("\r\n", "\n").replace("</script", "<\\/script")
    css = template_text("report.css").replace("\r\n", "\n").replace("</style", "<\\/style")
    return env.get_template("report.html.j2").render(
        title=title,
        analysis=analysis,
        data_json=_script_json(data),
        error_chart=error_chart(data["rows"]) if data["rows"] else None,
        latency_chart=latency_chart(timed, unit),
        module_chart=module_chart(data["modules"], unit),
        app_js=app_js,
        css=css,
        csp=content_security_policy([app_js], [css]),
    )


def write_html(analysis: Analysis, path: str | os.PathLike[str]) -> None:
    """Write the report for ``analysis`` to ``path`` (UTF-8)."""
    text = render_html(analysis)
    with open(os.fspath(path), "w", encoding="utf-8") as f:
        f.write(text)


def notebook_html(analysis: Analysis) -> str:
    """The report inside an ``<iframe srcdoc>``, so that its styles and scripts stay its own in Jupyter."""
    return ('<iframe style="width:100%;height:900px;border:1px solid #ddd" sandbox="allow-scripts" srcdoc="'
            + html.escape(render_html(analysis), quote=True) + '"></iframe>')
