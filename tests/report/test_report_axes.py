"""Issue 23 item 5: the report's charts name their ops on the x axis (shortened in the middle, the full
name under the mouse), one or a few rows get a sensible axis, and the culprit wording is the CLI's
("culprit": local error beyond noise; "inherited": error that came from the inputs). In headless Chromium."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from numdiff.analysis.models import Analysis
from numdiff.analysis.records import CulpritRow, CulpritSection
from numdiff.report import write_html
from numdiff.report.charts import shorten
from tests.report._browser import screenshots
from tests.report._synthetic import synthetic_analysis

OUTPUT = screenshots("report")
LONG = "aten_convolution_default_with_a_very_long_module_prefix_" + "x" * 20 + "_end"


def _open(driver: Any, analysis: Analysis, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    write_html(analysis, page)
    driver.get(page.as_uri())


def _x_ticks(driver: Any, chart: str) -> list[str]:
    return [str(t) for t in driver.execute_script(
        f"return [...document.querySelectorAll('#{chart} g[id=\"matplotlib.axis_1\"] g[id^=\"xtick\"] text')]"
        ".map(t => t.textContent)")]


def _hover(driver: Any, chart: str, k: int) -> str:
    """The tooltip's text with the mouse over position ``k`` of the chart's x axis."""
    return str(driver.execute_script("""
        const box = document.getElementById(arguments[0]), d = box.dataset, rect = box.getBoundingClientRect();
        const frac = +d.x0 + (arguments[1] - d.xmin) / (d.xmax - d.xmin) * (d.x1 - d.x0);
        box.dispatchEvent(new MouseEvent("mousemove", {clientX: rect.left + frac * rect.width,
                                                       clientY: rect.top + rect.height / 2, bubbles: true}));
        return document.getElementById("tooltip").textContent;""", chart, k))


def test_shorten_keeps_both_ends() -> None:
    assert shorten("relu_1") == "relu_1"
    short = shorten(LONG)
    assert len(short) == 22 and short.startswith("aten_conv") and short.endswith("_end") and "…" in short


def test_axes_name_the_ops_and_the_full_name_is_on_hover(driver: Any, tmp_path: Path) -> None:
    analysis = synthetic_analysis(n=8)
    assert analysis.gap is not None
    rows = [r.model_copy(update={"aot_ops": [LONG]}) if r.index == 3 else r for r in analysis.gap.rows]
    _open(driver, analysis.model_copy(update={"gap": analysis.gap.model_copy(update={"rows": rows})}), tmp_path)
    ticks = _x_ticks(driver, "chart-error")
    assert ticks == [r.aot_ops[0] if r.index != 3 else shorten(LONG) for r in rows], ticks
    assert not any(re.fullmatch(r"[-−0-9.]+", t) for t in ticks)
    assert LONG in _hover(driver, "chart-error", 3)
    latency = _x_ticks(driver, "chart-latency")
    assert latency[:2] == [shorten("native_call_conv2d.out"), shorten("native_call_batch_norm.out")], latency
    assert "native_call_relu.out" in _hover(driver, "chart-latency", 2)
    OUTPUT.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(OUTPUT / "axes-op-names.png"))


@pytest.mark.parametrize("n", [1, 2, 3])
def test_one_or_a_few_rows_have_a_sensible_axis(driver: Any, tmp_path: Path, n: int) -> None:
    _open(driver, synthetic_analysis(n=n), tmp_path)
    for chart in ("chart-error", "chart-latency"):
        ticks = _x_ticks(driver, chart)
        assert len(ticks) == n and not any(re.fullmatch(r"[-−0-9.]+", t) for t in ticks), (chart, ticks)
        xmin, xmax = driver.execute_script(
            f"const d = document.getElementById('{chart}').dataset; return [+d.xmin, +d.xmax]")
        assert (xmin, xmax) != (-0.5, 0.5) and xmax - xmin >= 2, (chart, xmin, xmax)
    assert _hover(driver, "chart-error", 0).startswith("#1 conv2d_0")
    if n == 1:
        driver.save_screenshot(str(OUTPUT / "axes-one-row.png"))


def test_culprit_and_inherited_in_the_clis_words(driver: Any, tmp_path: Path) -> None:
    analysis = synthetic_analysis(n=12)
    assert analysis.gap is not None
    bad = [r for r in analysis.gap.rows if r.snr[0] < 60]
    culprit, inherited = bad[0], bad[1]
    rows = [CulpritRow(aot_ops=culprit.aot_ops, verdict="broken", is_culprit=True, local_gap=30.0,
                       accumulated_gap=30.0, local_noise_units=900.0),
            CulpritRow(aot_ops=inherited.aot_ops, verdict="ok", is_culprit=False, local_gap=140.0,
                       accumulated_gap=35.0, local_noise_units=0.1)]
    _open(driver, analysis.model_copy(update={"culprits": CulpritSection(available=True, rows=rows)}), tmp_path)
    assert driver.find_element("id", "worst-title").text == "Culprits (local error beyond its expected noise)"
    tag = driver.find_element("css selector", "#worst-list .worst-item .cause")
    assert tag.text == "culprit" and tag.get_attribute("title") == "local error beyond its expected noise"
    causes = dict(driver.execute_script(
        "return [...document.querySelectorAll('#rows-table tbody tr')].map(tr => [tr.querySelector('td.op').textContent,"
        " tr.querySelector('td.cause').textContent])"))
    assert causes[culprit.aot_ops[0]] == "culprit" and causes[inherited.aot_ops[0]] == "inherited"
    assert {v for k, v in causes.items() if k not in (culprit.aot_ops[0], inherited.aot_ops[0])} == {""}
    header = driver.find_element("css selector", '#rows-table th[data-key="cause"]')
    assert "came from the op's inputs" in header.get_attribute("title")
    assert "inherited: error beyond the noise floor" in _hover(driver, "chart-error", inherited.index)
    driver.save_screenshot(str(OUTPUT / "culprit-inherited.png"))
