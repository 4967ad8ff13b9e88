"""The HTML report opened in a real headless Chromium (Selenium): what a user sees.

Skipped when chromium/chromedriver/selenium are missing (scripts/install_test_system_deps.sh
installs them as root); under CI=true a missing browser fails the tests instead.
Screenshots go to ``test-output/report/`` (or ``$NUMDIFF_TEST_OUTPUT/report/``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from numdiff.report import Analysis, write_html
from tests.report._browser import screenshots
from tests.report._synthetic import synthetic_analysis

OUTPUT = screenshots("report")


def _open(driver: Any, path: Path) -> list[dict[str, Any]]:
    """Load the page; return the network requests the browser made for it."""
    driver.get("about:blank")
    driver.get_log("performance")  # drop what came before
    driver.get_log("browser")
    driver.get(path.as_uri())
    driver.execute_script("return document.readyState")
    assert driver.execute_script("return document.body.getAttribute('data-ready')") is not None
    messages = [json.loads(e["message"])["message"] for e in driver.get_log("performance")]
    return [m["params"]["request"] for m in messages if m["method"] == "Network.requestWillBeSent"]


def _console_problems(driver: Any) -> list[dict[str, Any]]:
    return [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]


def _screenshot(driver: Any, name: str) -> Path:
    OUTPUT.mkdir(parents=True, exist_ok=True)
    path = OUTPUT / name
    assert driver.save_screenshot(str(path))
    assert path.stat().st_size > 10_000
    return path


def _in_first_screen(driver: Any, css: str) -> bool:
    return bool(driver.execute_script(
        "const r = document.querySelector(arguments[0]).getBoundingClientRect();"
        "return r.height > 0 && r.top >= 0 && r.bottom <= window.innerHeight && r.left >= 0 && r.right <= window.innerWidth;",
        css))


def _column(driver: Any, key: str) -> list[str]:
    return [str(t) for t in driver.execute_script(
        "return Array.from(document.querySelectorAll('#rows-table tbody tr:not(.more) td.' + arguments[0]))"
        ".map((td) => td.textContent);", key)]


def _header(driver: Any, key: str) -> Any:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.CSS_SELECTOR, f'#rows-table th[data-key="{key}"]')


def test_example_report_opens_offline_without_errors(driver: Any, example_analysis: Analysis, tmp_path: Path) -> None:
    page = tmp_path / "example.html"
    write_html(example_analysis, page)
    requests = _open(driver, page)
    assert [r["url"] for r in requests] == [page.as_uri()]
    assert _console_problems(driver) == []
    assert example_analysis.gap is not None
    worst = min((r for r in example_analysis.gap.rows if r.matched), key=lambda r: min(r.snr))
    assert _in_first_screen(driver, "#worst-row")
    text = driver.execute_script("return document.getElementById('worst-row').textContent")
    assert worst.aot_ops[-1] in text and (worst.source_line or "") in text
    _screenshot(driver, "example-first-screen.png")


def test_quantized_xnnpack_report(driver: Any, quant_analysis: Analysis, tmp_path: Path) -> None:
    page = tmp_path / "quant.html"
    write_html(quant_analysis, page)
    assert [r["url"] for r in _open(driver, page)] == [page.as_uri()]
    assert _console_problems(driver) == []
    assert quant_analysis.gap is not None
    assert len(_column(driver, "op")) == len(quant_analysis.gap.rows)
    _screenshot(driver, "pt2e-quant-first-screen.png")


@pytest.fixture(scope="module")
def big_page(tmp_path_factory: pytest.TempPathFactory) -> tuple[Analysis, Path]:
    analysis = synthetic_analysis(1000)
    page = tmp_path_factory.mktemp("big") / "big.html"
    write_html(analysis, page)
    return analysis, page


def test_sorting_a_thousand_rows(driver: Any, big_page: tuple[Analysis, Path]) -> None:
    analysis, page = big_page
    assert [r["url"] for r in _open(driver, page)] == [page.as_uri()]
    assert _console_problems(driver) == []
    assert analysis.gap is not None
    snrs = sorted(r.snr[0] for r in analysis.gap.rows)
    assert _in_first_screen(driver, "#worst-row")
    worst = min(analysis.gap.rows, key=lambda r: r.snr[0])
    assert f"#{worst.index + 1} {worst.aot_ops[0]}" in driver.execute_script("return document.getElementById('worst-row').textContent")

    _header(driver, "snr").click()
    shown = [float(v) for v in _column(driver, "snr")]
    assert len(shown) == 200  # first page; the rest on request
    assert shown == pytest.approx(snrs[:200], abs=0.051)  # 4 significant digits shown
    assert _header(driver, "snr").get_attribute("aria-sort") == "ascending"
    _header(driver, "snr").click()
    shown = [float(v) for v in _column(driver, "snr")]
    assert shown == pytest.approx(snrs[::-1][:200], abs=0.051)
    assert _header(driver, "snr").get_attribute("aria-sort") == "descending"

    driver.execute_script("document.querySelector('#rows-table tr.more button').click()")
    assert len(_column(driver, "snr")) == 1000
    _header(driver, "op").click()
    ops = _column(driver, "op")
    assert ops == sorted(ops, key=str.lower)


def test_filtering_rows(driver: Any, big_page: tuple[Analysis, Path]) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    analysis, page = big_page
    _open(driver, page)
    assert analysis.gap is not None
    box = driver.find_element(By.ID, "filter")
    box.send_keys("softmax")
    expected = [r for r in analysis.gap.rows if any("softmax" in op for op in r.aot_ops)]
    ops = _column(driver, "op")
    assert len(ops) == len(expected) and all("softmax" in op for op in ops)
    assert driver.find_element(By.ID, "row-count").text == f"{len(expected)} of 1000 rows"

    box.clear()
    box.send_keys("no such op anywhere")
    assert _column(driver, "op") == []
    box.clear()
    driver.execute_script("document.getElementById('filter').dispatchEvent(new Event('input'))")
    Select(driver.find_element(By.ID, "only")).select_by_value("below")
    below = [r for r in analysis.gap.rows if r.snr[0] < 126.2]
    assert driver.find_element(By.ID, "row-count").text == f"{len(below)} of 1000 rows"
    assert all(float(v) < 126.2 for v in _column(driver, "snr"))
    assert _console_problems(driver) == []


def test_details_show_histogram_stats_and_trace(driver: Any, big_page: tuple[Analysis, Path]) -> None:
    from selenium.webdriver.common.by import By

    analysis, page = big_page
    _open(driver, page)
    driver.find_element(By.ID, "worst-row").click()
    details = driver.find_element(By.ID, "details")
    assert details.is_displayed()
    worst = min(analysis.gap.rows, key=lambda r: r.snr[0]) if analysis.gap else None
    assert worst is not None and worst.error_histogram is not None
    bars = driver.find_elements(By.CSS_SELECTOR, "#chart-hist svg rect")
    assert len(bars) == len(worst.error_histogram.counts)
    assert "model.py" in driver.find_element(By.ID, "details-trace").text
    assert "float32" in driver.find_element(By.ID, "details-stats").text
    _screenshot(driver, "synthetic-1000-details.png")
    assert _console_problems(driver) == []


def test_chart_tooltip_names_the_layer(driver: Any, big_page: tuple[Analysis, Path]) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    analysis, page = big_page
    _open(driver, page)
    chart = driver.find_element(By.ID, "chart-error")
    g = {k: float(chart.get_attribute(f"data-{k}")) for k in ("x0", "x1", "xmin", "xmax")}
    width = chart.size["width"]
    target = 500
    frac = g["x0"] + (target - g["xmin"]) / (g["xmax"] - g["xmin"]) * (g["x1"] - g["x0"])
    ActionChains(driver).move_to_element_with_offset(chart, int(frac * width - width / 2), 0).perform()
    tip = driver.find_element(By.ID, "tooltip")
    assert tip.is_displayed()
    shown = int(tip.text.split()[0].lstrip("#"))
    assert math.isclose(shown, target, abs_tol=2)  # one pixel spans about one layer


def test_planted_culprit_is_in_the_first_screen(driver: Any, tmp_path: Path) -> None:
    from numdiff.examples import example_files

    f = example_files("planted_culprit")
    analysis = Analysis.from_files(f.etdump, f.etrecord, f.debug_buffer, labels={"model": "planted_culprit"})
    culprits = [c for c in analysis.culprits.rows if c.is_culprit]
    if not analysis.culprits.available:
        pytest.fail(f"culprit localization should run on the bundled example: {analysis.culprits.reason}")
    page = tmp_path / "culprit.html"
    write_html(analysis, page)
    assert [r["url"] for r in _open(driver, page)] == [page.as_uri()]
    assert _console_problems(driver) == []
    assert _in_first_screen(driver, "#worst-row")
    text = driver.execute_script("return document.getElementById('worst-row').textContent")
    assert len(culprits) == 1 and culprits[0].aot_ops[-1] in text and (culprits[0].source_line or "?") in text
    assert driver.execute_script("return document.getElementById('worst-title').textContent").startswith("Culprits")
    _screenshot(driver, "planted-culprit-first-screen.png")
