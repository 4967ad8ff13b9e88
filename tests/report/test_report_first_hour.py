"""The report as a new user first reads it: no identical (∞ dB) layer among the worst, a readable header
chip, rows numbered from 1. Opened in headless Chromium like tests/report/test_report_browser.py."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from numdiff.report import write_html
from tests.report._browser import screenshots
from tests.report._synthetic import synthetic_analysis

OUTPUT = screenshots("report")


def _page(tmp_path: Path, infinite: int) -> Path:
    analysis = synthetic_analysis(n=8)
    assert analysis.gap is not None
    rows = [r.model_copy(update={"snr": [math.inf]}) if r.index < infinite else r for r in analysis.gap.rows]
    analysis = analysis.model_copy(update={"gap": analysis.gap.model_copy(update={"rows": rows})})
    page = tmp_path / "report.html"
    write_html(analysis, page)
    return page


def _worst_rows(driver: Any) -> list[int]:
    return [int(v) for v in driver.execute_script(
        "return [...document.querySelectorAll('#worst-list .worst-item')].map(e => e.dataset.row)")]


def test_infinite_rows_are_not_among_the_worst(driver: Any, tmp_path: Path) -> None:
    driver.get(_page(tmp_path, infinite=5).as_uri())
    worst = _worst_rows(driver)
    assert worst and all(i >= 5 for i in worst), worst
    first = driver.execute_script("return document.querySelector('#worst-list .worst-item b').textContent")
    assert first.startswith(f"#{worst[0] + 1} ")  # numbered from 1, as the rows table is
    OUTPUT.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(OUTPUT / "first-hour-worst.png"))


def test_all_identical_says_so(driver: Any, tmp_path: Path) -> None:
    driver.get(_page(tmp_path, infinite=8).as_uri())
    assert _worst_rows(driver) == []
    assert "identical to the reference" in driver.find_element("id", "worst-list").text


def test_version_chip_is_readable_on_the_dark_header(driver: Any, tmp_path: Path) -> None:
    driver.get(_page(tmp_path, infinite=0).as_uri())
    fg, bg = driver.execute_script(
        "const c = document.querySelector('header .chip.muted');"
        "return [getComputedStyle(c).color, getComputedStyle(document.querySelector('header')).backgroundColor];")

    def luminance(css: str) -> float:
        r, g, b = (int(v) / 255 for v in css[css.index("(") + 1:].rstrip(")").split(",")[:3])
        lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in (r, g, b)]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    hi, lo = sorted((luminance(fg), luminance(bg)), reverse=True)
    assert (hi + 0.05) / (lo + 0.05) >= 4.5, (fg, bg)  # WCAG AA for normal text


@pytest.mark.parametrize(("headline", "cls"), [
    ("0 culprits in step 0; decode diverges at step 4 (culprit index_select; index_select_1)", "warn"),
    ("no culprit: every local error is within its expected noise", "ok"),
])
def test_the_culprit_headline_leads_and_nothing_says_otherwise(driver: Any, tmp_path: Path, headline: str,
                                                                cls: str) -> None:
    """Issue 20: the first screen says what every culprit view found (a decode divergence is never
    hidden under "no culprit")."""
    analysis = synthetic_analysis(n=8)
    rows = [r.model_copy(update={"is_culprit": False}) for r in analysis.culprits.rows]
    culprits = analysis.culprits.model_copy(update={"available": True, "rows": rows, "headline": headline})
    page = tmp_path / "report.html"
    write_html(analysis.model_copy(update={"culprits": culprits}), page)
    driver.get(page.as_uri())
    shown = driver.find_element("id", "culprit-headline")
    assert shown.text == headline and shown.get_attribute("class") == cls
    assert "no culprit: every local error" not in driver.find_element("id", "worst-title").text


def test_a_run_on_other_inputs_says_so_under_the_headline(driver: Any, tmp_path: Path) -> None:
    """A run whose ops that read the graph input all disagree with the reference (the oracle fixture
    culprit_near_inputs: the device ran its input plus 1% noise) may have used other inputs: its
    accumulated gaps compare two inputs. The first screen said only "1 row not judged" and showed
    every layer below the floor in red (the real-size Llama run on other inputs: 20 red rows)."""
    import warnings

    from numdiff.report import Analysis
    from tests.culprits.helpers import folder

    d = folder("culprit_near_inputs")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        analysis = Analysis.from_files(d / "etdump.etdp", str(d / "etrecord.bin"), d / "debug_buffer.bin")
    assert analysis.culprits.inputs_in_doubt == ["x"]
    assert analysis.culprits.inputs_note is not None and analysis.culprits.inputs_note.startswith("graph input(s) x: ")
    assert analysis.culprits.inputs_note.endswith(".")
    page = tmp_path / "report.html"
    write_html(analysis, page)
    driver.get(page.as_uri())
    order = driver.execute_script("return [...document.querySelector('#worst-title').parentElement.children]"
                                  ".map(e => e.id).filter(Boolean)")
    assert order.index("worst-title") < order.index("culprit-headline") < order.index("inputs-note"), order
    assert "may have used other inputs" in driver.find_element("id", "inputs-note").text
    stats = driver.execute_script("return [...document.querySelectorAll('#summary-numbers > div')].map("
                                  "d => [d.querySelector('.muted').textContent, d.querySelector('.big').className])")
    below = next(cls for label, cls in stats if label.startswith("below the noise floor"))
    assert "bad" not in below and any("against the reference run on the ETRecord's inputs" in label for label, _ in stats)
    assert not driver.execute_script("return document.querySelectorAll('#worst-list .worst-item .bad').length")
    driver.save_screenshot(str(OUTPUT / "first-hour-other-inputs.png"))


def test_a_run_judged_on_its_own_inputs_says_what_its_gap_compares(driver: Any, tmp_path: Path) -> None:
    """The same run analysed with its own inputs (step_inputs): every layer is within float noise, and the
    first screen says the figures are against the model on those inputs, not the representative ones."""
    from numdiff.report import Analysis
    from tests.culprits.helpers import folder

    d = folder("culprit_near_inputs")
    analysis = Analysis.from_files(d / "etdump.etdp", str(d / "etrecord.bin"), d / "debug_buffer.bin",
                                   culprit_options={"step_inputs": d / "run_inputs.pt"})
    assert analysis.gap is not None and analysis.gap.reference_inputs == "own"
    page = tmp_path / "report.html"
    write_html(analysis, page)
    driver.get(page.as_uri())
    stats = driver.execute_script("return [...document.querySelectorAll('#summary-numbers > div')].map("
                                  "d => [d.querySelector('.muted').textContent, d.querySelector('.big').textContent])")
    labels = dict(stats)
    assert labels["below the noise floor (against the model on the run's own inputs)"] == "0", stats
    assert float(labels["lowest SNR (dB) (against the model on the run's own inputs)"]) > 130
    assert not driver.find_elements("id", "inputs-note")


def test_a_delegate_rows_runtime_ops_are_counted_not_listed(driver: Any, tmp_path: Path) -> None:
    """The real-size Llama's first row held 646 runtime ops, one per line: a cell 30 lines tall."""
    analysis = synthetic_analysis(n=8)
    assert analysis.gap is not None
    many = ["DELEGATE_CALL"] * 200 + ["native_call_expand_copy.out"] * 100 + ["a", "b"]
    ops = ["dequantize_per_tensor", "linear", "relu", "quantize_per_tensor_1", "dequantize_per_tensor_2"]
    rows = [r.model_copy(update={"runtime_ops": many, "aot_ops": ops}) if r.index == 0 else r for r in analysis.gap.rows]
    page = tmp_path / "report.html"
    write_html(analysis.model_copy(update={"gap": analysis.gap.model_copy(update={"rows": rows})}), page)
    driver.get(page.as_uri())
    cell, title = driver.execute_script("const td = document.querySelector('#rows-table tbody tr td.rops');"
                                        "return [td.textContent, td.title];")
    assert cell == "DELEGATE_CALL ×200, native_call_expand_copy.out ×100, a (+1 more)"
    assert title == ", ".join(many)  # the whole list on hover (and in the details panel)
    op = driver.execute_script("return document.querySelector('#rows-table tbody tr td.op').textContent")
    assert op == "linear, relu (+3 q/dq)"  # what computes, not the last dequantize
