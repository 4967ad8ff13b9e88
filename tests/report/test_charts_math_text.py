"""`$...$` in a label from a file is shown as written, never parsed as matplotlib math text (issue 22, item 6).

A module path, a delegate name or a manifest label holding ``$\\nosuch{$`` used to make matplotlib's
math parser fail, and with it ``numdiff report`` and ``numdiff fleet summary`` (exit 4).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from numdiff.cli import main
from tests.report._synthetic import synthetic_analysis

pytest.importorskip("matplotlib")
pytest.importorskip("jinja2")

CRAFTED = "$\\nosuch{$"


def test_module_chart_shows_a_dollar_label_as_written() -> None:
    from numdiff.report.charts import module_chart

    chart = module_chart([{"module": CRAFTED, "p50": 1.0}, {"module": "$x^2$", "p50": 0.5}], "ms")
    assert "nosuch{" in chart.svg and "x^2" in chart.svg


def test_plain_text_leaves_math_text_on_outside() -> None:
    import matplotlib

    from numdiff.report.charts import plain_text

    with plain_text():
        assert matplotlib.rcParams["text.parse_math"] is False
    assert matplotlib.rcParams["text.parse_math"] is True  # a user's own figures keep their math text


def test_numdiff_report_with_a_dollar_module_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    analysis = synthetic_analysis(12)
    block = analysis.profile.blocks[0] if analysis.profile else None
    assert block is not None
    block.events[0] = block.events[0].model_copy(update={"module": CRAFTED})
    analysis.gap.rows[0] = analysis.gap.rows[0].model_copy(update={"module": CRAFTED})  # type: ignore[union-attr]
    path = tmp_path / "analysis.json"
    analysis.save(path)
    out = tmp_path / "report.html"
    assert main(["report", str(path), "-o", str(out)]) == 0, capsys.readouterr().err
    assert "nosuch{" in out.read_text(encoding="utf-8")


def test_fleet_heatmap_with_dollar_ops_and_labels(tmp_path: Path) -> None:
    from numdiff.batch.fleet import Cell, FleetSummary, render_fleet_html

    cell = Cell(runs=2, diverging=1, snr_median_db=20.0, snr_min_db=10.0, latency_p50_ms=0.5)
    ops, groups = [CRAFTED, "relu"], ["$\\frac{$", "pixel8"]
    summary = FleetSummary(by="device", ops=ops, groups=groups, cells={(o, g): cell for o in ops for g in groups},
                           runs_ok={g: 2 for g in groups}, runs_failed={}, failures=[])
    html = render_fleet_html(summary, title="$fleet$")
    assert "nosuch{" in html and "frac{" in html
