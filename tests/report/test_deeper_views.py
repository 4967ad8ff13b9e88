"""The three deeper-localization views through `numdiff analyze`, the saved file and the HTML report.

Real oracle artifacts (tests/fixtures/deeper_*, scripts/make_deeper_fixtures.py): the quantization
view on a PT2E int8 model whose fc2 is made sensitive, the decode steps of a tiny Llama-style step
whose rotary tables go wrong from step 4, and the ops inside one XNNPACK delegate exported with
taps. Each view must be in the analysis file (and survive a reload), in the HTML report as a
table, and visible in a real Chromium.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from numdiff.cli import main
from numdiff.report import Analysis, render_html
from tests.conftest import FIXTURES
from tests.conftest import artifact_args


def _truth(name: str) -> dict[str, Any]:
    return dict(json.loads((FIXTURES / name / "truth.json").read_text()))


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """`numdiff analyze` of each fixture with its view's options (one call each, shared)."""
    out = tmp_path_factory.mktemp("deeper")
    options = {
        "deeper_quant": ["--float-program", str(FIXTURES / "deeper_quant" / "float_etrecord.bin"), "--target-snr", "30"],
        "deeper_decode": ["--step-inputs", str(FIXTURES / "deeper_decode" / "step_inputs.pt")],
        "deeper_taps": ["--taps", str(FIXTURES / "deeper_taps" / "taps.json"),
                        "--tap-outputs", str(FIXTURES / "deeper_taps" / "tap_outputs.pt")],
    }
    paths = {}
    for name, extra in options.items():
        path = out / f"{name}.json"
        assert main(["analyze", *artifact_args(name), *extra, "-o", str(path)]) == 0
        paths[name] = path
    return paths


def test_quantization_view_is_saved_and_rendered(saved: dict[str, Path]) -> None:
    analysis = Analysis.load(saved["deeper_quant"])
    q = analysis.culprits.quantization
    assert q is not None and q.target_snr_db == 30
    sensitive = _truth("deeper_quant")["sensitive_layer"]
    assert q.layers[0].module_path == sensitive["module"] and q.layers[0].keep_in_float
    assert q.suggested_keep and q.suggested_keep[0] == q.layers[0].layer
    page = render_html(analysis)
    table = re.search(r'<table id="quant-table">(.*?)</table>', page, re.S)
    assert table is not None and table.group(1).count("<tr") == len(q.layers) + 1
    first = re.search(r"<tbody>\s*<tr class=\"culprit\"><td>1</td><td>([^<]*)</td>", table.group(1))
    assert first is not None and first.group(1) == q.layers[0].layer
    assert f"Keep in higher precision: <b>{q.suggested_keep[0]}" in page


def test_decode_view_is_saved_and_rendered(saved: dict[str, Path]) -> None:
    analysis = Analysis.load(saved["deeper_decode"])
    d = analysis.culprits.decode
    truth = _truth("deeper_decode")
    assert d is not None and d.with_step_inputs and len(d.steps) == truth["runs"]
    assert d.first_divergent_step == truth["first_bad_step"]
    diverging = next(s for s in d.steps if s.step == truth["first_bad_step"])
    assert {op for ops in diverging.culprit_ops for op in ops} & set(truth["planted_aot_ops"])
    assert not any(s.diverges for s in d.steps if s.step < truth["first_bad_step"])
    page = render_html(analysis)
    assert f"First divergent step: <b>{truth['first_bad_step']}</b>" in page
    rows = re.findall(r"<tr( class=\"culprit\")?><td>(\d+)</td>", page.split('id="decode-table"')[1].split("</table>")[0])
    assert [int(step) for _, step in rows] == list(range(truth["runs"]))
    assert int(next(step for mark, step in rows if mark)) == truth["first_bad_step"]


def test_inside_delegates_view_is_saved_and_rendered(saved: dict[str, Path]) -> None:
    analysis = Analysis.load(saved["deeper_taps"])
    taps = analysis.culprits.inside_delegates
    truth = _truth("deeper_taps")
    assert taps is not None and len(taps) == truth["taps"]
    assert [t.node for t in taps if t.is_culprit] == truth["planted_aot_ops"]
    page = render_html(analysis)
    body = page.split('id="taps-table"')[1].split("</table>")[0]
    assert body.count("<tr") == truth["taps"] + 1
    assert re.search(rf'<tr class="culprit"><td>{truth["planted_aot_ops"][0]}</td><td>fc2</td>', body)


def test_no_views_no_section(saved: dict[str, Path]) -> None:
    analysis = Analysis.load(saved["deeper_taps"])
    plain = analysis.model_copy(update={"culprits": analysis.culprits.model_copy(update={"inside_delegates": None})})
    assert 'id="deeper-section"' not in render_html(plain)
    assert 'id="deeper-section"' in render_html(analysis)


def test_analyze_rejects_target_snr_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["analyze", *artifact_args("deeper_quant"), "--target-snr", "30", "-o", str(tmp_path / "a.json")])
    assert code == 2 and "--target-snr needs --float-program" in capsys.readouterr().err
    assert not (tmp_path / "a.json").exists()


@pytest.mark.parametrize("name, table", [("deeper_quant", "quant-table"), ("deeper_decode", "decode-table"),
                                         ("deeper_taps", "taps-table")])
def test_views_are_visible_in_chromium(driver: Any, saved: dict[str, Path], tmp_path: Path, name: str,
                                       table: str) -> None:
    from selenium.webdriver.common.by import By

    page = tmp_path / f"{name}.html"
    assert main(["report", str(saved[name]), "-o", str(page)]) == 0
    driver.get(page.as_uri())
    assert driver.execute_script("return document.body.getAttribute('data-ready')") is not None
    element = driver.find_element(By.ID, table)
    driver.execute_script("arguments[0].scrollIntoView()", element)
    assert element.is_displayed()
    highlighted = element.find_elements(By.CSS_SELECTOR, "tbody tr.culprit")
    assert highlighted and all(r.is_displayed() for r in highlighted)
    assert [e for e in driver.get_log("browser") if e["level"] == "SEVERE"] == []
