"""The HTML report as a file: self-contained, data intact and escaped, CLI paths."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from numdiff.cli import main
from numdiff.examples import example_files
from numdiff.report import Analysis, render_html, write_html
from tests.conftest import SAVED_ANALYSES as DATA, artifact_args


def _data(html: str) -> dict:  # type: ignore[type-arg]
    m = re.search(r'<script type="application/json" id="numdiff-data">(.*?)</script>', html, re.S)
    assert m is not None
    return json.loads(m.group(1))  # type: ignore[no-any-return]


def test_report_needs_nothing_from_the_network(example_analysis: Analysis) -> None:
    html = render_html(example_analysis)
    assert not re.search(r"<(script|img|link|iframe)[^>]*\s(src|href)=", html, re.I)
    assert not re.search(r"url\(\s*['\"]?(https?:)?//", html, re.I)
    assert "default-src 'none'" in html  # the page itself forbids any fetch
    assert html.count("<svg") >= 3  # charts are inline SVG


def test_report_carries_every_row_and_event(example_analysis: Analysis) -> None:
    data = _data(render_html(example_analysis))
    assert example_analysis.gap is not None
    assert [r["ops"] for r in data["rows"]] == [r.aot_ops for r in example_analysis.gap.rows]
    assert len(data["events"]) == sum(len(b.events) for b in example_analysis.profile.blocks)
    cumsum = next(r for r in data["rows"] if r["op"] == "cumsum")
    assert cumsum["snr"] == pytest.approx(example_analysis.gap.rows[cumsum["i"]].snr[0])
    assert cumsum["floor"] is not None and cumsum["hist"] is not None
    assert data["rows"][0]["snr"] == "inf"
    assert data["meta"]["match_explanation"] == example_analysis.gap.match_explanation


def test_hostile_labels_are_escaped(example_analysis: Analysis) -> None:
    evil = '</script><script>alert(1)</script><img src=x onerror=alert(2)>'
    analysis = example_analysis.model_copy(update={"labels": {"model": evil, "k": evil}})
    html = render_html(analysis)
    assert evil not in html and "<img src=x" not in html
    assert _data(html)["meta"]["labels"]["k"] == evil


def test_profile_only_report_says_why() -> None:
    with pytest.warns(UserWarning):
        analysis = Analysis.from_files(example_files().etdump)
    html = render_html(analysis)
    assert "the numerical gap needs an ETRecord" in html
    assert _data(html)["rows"] == []


def test_notebook_display_wraps_the_report(example_analysis: Analysis) -> None:
    out = example_analysis._repr_html_()
    assert out.startswith("<iframe") and "srcdoc=" in out and "&lt;!DOCTYPE html&gt;" in out


def test_write_html_and_cli_from_an_analysis_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.html"
    assert main(["report", str(DATA / "analysis_v1.json"), "-o", str(out)]) == 0
    assert _data(out.read_text())["meta"]["labels"]["model"] == "quantized_mlp"
    write_html(Analysis.load(DATA / "analysis_v1.json"), tmp_path / "r2.html")
    assert (tmp_path / "r2.html").read_text() == out.read_text()


def test_cli_from_artifacts(tmp_path: Path) -> None:
    out = tmp_path / "q.html"
    assert main(["report", *artifact_args("pt2e_quant"), "--label", "device=host", "-o", str(out)]) == 0
    assert _data(out.read_text())["meta"]["labels"] == {"device": "host"}


@pytest.mark.parametrize(("argv", "message"), [
    (["report", "-o", "x.html"], "nothing to report on"),
    (["report", "a.json", "--etdump", "e.etdp", "-o", "x.html"], "give either ANALYSIS.json or --etdump"),
    (["report", "a.json", "--label", "a=b", "-o", "x.html"], "go with --etdump, not with ANALYSIS.json"),
    (["report", "missing.json", "-o", "x.html"], "analysis file 'missing.json': cannot be read"),
])
def test_cli_errors(argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) != 0
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x.html").exists()


def test_latency_views_count_each_op_once(example_analysis: Analysis) -> None:
    data = _data(render_html(example_analysis))
    timed = [data["events"][k]["name"] for k in data["timed"]]
    assert "OPERATOR_CALL" not in timed and not any("::" in n for n in timed)  # wrappers and framework steps
    assert timed.count("native_call_cumsum.out") == 1 and timed.count("DELEGATE_CALL") == 2
    modules = {m["module"]: m for m in data["modules"]}
    calls = [e["p50"] for e in data["events"] if e["name"] == "DELEGATE_CALL"]
    assert modules["delegate XnnpackBackend"]["p50"] == pytest.approx(sum(calls))
    assert modules["delegate XnnpackBackend"]["count"] == 2
    cumsum = next(e for e in data["events"] if e["name"] == "native_call_cumsum.out")
    assert modules[cumsum["module"]]["p50"] == pytest.approx(cumsum["p50"])  # not doubled by its OPERATOR_CALL
