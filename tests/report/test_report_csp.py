"""Issue 22, item 14: the report's Content-Security-Policy allows no ``'unsafe-inline'``, and the report still
works under it in a real headless Chromium (its script runs, its styles and the charts' colours apply).

The report is one offline file: its one script and one style sheet are allowed by their SHA-256, and the
matplotlib charts carry SVG presentation attributes instead of inline ``style=""``. A control page with an
injected inline script and inline style shows that Chromium enforces the policy in these tests.
"""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path
from typing import Any

from numdiff.report import Analysis, render_html
from numdiff.report.charts import presentation_attributes

_META = re.compile(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">')


def _policy(page: str) -> dict[str, list[str]]:
    [content] = _META.findall(page)
    return {d.split()[0]: d.split()[1:] for d in (part.strip() for part in content.split(";")) if d}


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def test_the_policy_allows_the_reports_own_script_and_style_by_hash_and_nothing_inline(
        example_analysis: Analysis) -> None:
    page = render_html(example_analysis)
    assert "unsafe-inline" not in page and "unsafe-eval" not in page
    policy = _policy(page)
    assert policy["default-src"] == ["'none'"] and policy["base-uri"] == ["'none'"]
    scripts = re.findall(r"<script>(.*?)</script>", page, re.DOTALL)  # the executable one (the data is JSON)
    styles = re.findall(r"<style>(.*?)</style>", page, re.DOTALL)
    assert len(scripts) == 1 and len(styles) == 1
    assert policy["script-src"] == [_sha256(scripts[0])] and policy["style-src"] == [_sha256(styles[0])]
    # nothing else inline: no style attributes, no <style> inside the charts, no event-handler attributes
    assert ' style="' not in page and page.count("<style") == 1
    assert not re.search(r"<[a-z][^>]*\son[a-z]+=", page)
    assert 'fill="#1976d2"' in page  # the charts' colours are attributes now


def test_presentation_attributes_keep_what_the_style_said() -> None:
    svg = ('<svg xmlns="http://www.w3.org/2000/svg" width="10pt">\n <defs>\n  <style type="text/css">'
           '*{stroke-linejoin: round; stroke-linecap: butt}</style>\n </defs>\n'
           '<path d="M 0 0" fill="red" style="fill: none; stroke: #1976d2; stroke-linecap: square"/>'
           '<text style="font-size: 8px; font-family: \'DejaVu Sans\', sans-serif; text-anchor: end">a;b &lt; c</text>'
           '</svg>')
    assert presentation_attributes(svg) == (
        '<svg stroke-linejoin="round" stroke-linecap="butt" xmlns="http://www.w3.org/2000/svg" width="10pt">\n'
        '<path d="M 0 0" fill="none" stroke="#1976d2" stroke-linecap="square"/>'
        '<text font-size="8px" font-family="\'DejaVu Sans\', sans-serif" text-anchor="end">a;b &lt; c</text></svg>')


def test_a_label_that_looks_like_a_style_attribute_stays_text() -> None:
    """Chart labels come from files: one that spells ``style="..."`` is text inside an element (matplotlib
    escapes ``<``), so the conversion leaves it as written."""
    crafted = 'blocks.0 style="fill: red" &lt;b>'
    assert presentation_attributes(f'<svg><text x="1" style="fill: #888">{crafted}</text></svg>') == \
        f'<svg><text x="1" fill="#888">{crafted}</text></svg>'


def _violations(driver: Any) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if "Content Security Policy" in e["message"]]


def test_the_report_works_under_its_policy_in_chromium(driver: Any, example_analysis: Analysis,
                                                      tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text(render_html(example_analysis), encoding="utf-8")
    driver.get("about:blank")
    driver.get_log("browser")
    driver.get(page.as_uri())
    # the script ran: it marks the page ready and fills the tables and the summary
    assert driver.execute_script("return document.body.getAttribute('data-ready')") is not None
    assert driver.execute_script("return document.querySelectorAll('#rows-table tbody tr').length") > 0
    assert driver.execute_script("return document.getElementById('summary-numbers').textContent.length") > 0
    # the style sheet applies (report.css: header #263238), and the charts' presentation attributes do
    style = driver.execute_script("return getComputedStyle(document.querySelector('header')).backgroundColor")
    assert style == "rgb(38, 50, 56)", style
    fill = driver.execute_script(
        "const e = document.querySelector('#chart-latency [fill=\"#1976d2\"]'); return e && getComputedStyle(e).fill")
    assert fill == "rgb(25, 118, 210)", fill
    join = driver.execute_script(
        "return getComputedStyle(document.querySelector('#chart-latency svg path')).strokeLinejoin")
    assert join == "round"  # matplotlib's default, now inherited from the root <svg>
    assert _violations(driver) == []

    # control: the same page with an injected inline script and style is refused by Chromium
    hostile = tmp_path / "hostile.html"
    hostile.write_text(page.read_text().replace(
        "<main>", "<main><script>document.body.setAttribute('data-injected', '1')</script>"
        "<p id='injected' style='color: rgb(1, 2, 3)'>x</p>", 1), encoding="utf-8")
    driver.get(hostile.as_uri())
    assert driver.execute_script("return document.body.getAttribute('data-ready')") is not None
    assert driver.execute_script("return document.body.getAttribute('data-injected')") is None
    assert driver.execute_script("return getComputedStyle(document.getElementById('injected')).color") != "rgb(1, 2, 3)"
    refused = _violations(driver)
    assert any("script" in m for m in refused) and any("style" in m for m in refused), refused


def test_the_fleet_summary_has_the_same_strict_policy_and_renders_under_it(driver: Any, tmp_path: Path) -> None:
    """``numdiff fleet summary``'s HTML allowed ``style-src 'unsafe-inline'`` too: now its one style sheet by hash."""
    from numdiff.batch.fleet import Cell, FleetSummary, render_fleet_html

    cell = Cell(runs=2, diverging=1, snr_median_db=20.0, snr_min_db=10.0, latency_p50_ms=0.5)
    ops, groups = ["aten.linear", "aten.relu"], ["pixel8", "pixel9"]
    summary = FleetSummary(by="device", ops=ops, groups=groups, cells={(o, g): cell for o in ops for g in groups},
                           runs_ok={g: 2 for g in groups}, runs_failed={}, failures=[])
    html = render_fleet_html(summary)
    assert "unsafe-inline" not in html and ' style="' not in html and html.count("<style") == 1
    [css] = re.findall(r"<style>(.*?)</style>", html, re.DOTALL)
    policy = _policy(html)
    assert policy["style-src"] == [_sha256(css)] and policy["script-src"] == ["'none'"]
    page = tmp_path / "fleet.html"
    page.write_text(html, encoding="utf-8")
    driver.get("about:blank")
    driver.get_log("browser")
    driver.get(page.as_uri())
    assert driver.execute_script("return getComputedStyle(document.querySelector('header')).backgroundColor") \
        == "rgb(38, 50, 56)"
    assert driver.execute_script("return getComputedStyle(document.querySelector('.heat svg')).display") == "block"
    assert _violations(driver) == []
