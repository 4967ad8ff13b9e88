"""Issue 20 item 4: a gate passes only what it compared.

An analysis knows its program (a signature of the ETRecord's Edge programs); ``numdiff diff`` and
``diff_analyses`` refuse analyses of different programs (exit 3), fail when too little of the base
was matched (exit 1, never "no regression (0 layers compared)"), and compare an analysis without a
signature (an older file) with a warning that the program could not be checked.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from numdiff.analysis.diff import DifferentProgramsError, GateThresholds, diff_analyses
from numdiff.analysis.signature import program_signature, signature_of_ops
from numdiff.cli import main
from numdiff.report import Analysis
from numdiff.report.diff_render import render_diff
from numdiff.schema.etrecord import parse_etrecord
from tests.conftest import FIXTURES, SAVED_ANALYSES, artifact_args


def _analyse(name: str, **labels: str) -> Analysis:
    args = artifact_args(name)
    return Analysis.from_files(args[1], args[3], args[5], labels=labels)


@pytest.fixture(scope="module")
def mlp_pixel() -> Analysis:
    return _analyse("mlp_fp32", model="mlp", device="pixel8")


@pytest.fixture(scope="module")
def mlp_host() -> Analysis:
    return _analyse("mlp_fp32", model="mlp", device="host")


@pytest.fixture(scope="module")
def cnn() -> Analysis:
    return _analyse("cnn_nested", model="cnn", device="pixel8")


def test_an_analysis_knows_its_program(mlp_pixel: Analysis, mlp_host: Analysis, cnn: Analysis,
                                       tmp_path: Path) -> None:
    assert mlp_pixel.program is not None and cnn.program is not None
    assert mlp_pixel.program == mlp_host.program  # one program on two "devices"
    assert mlp_pixel.program.sha256 != cnn.program.sha256
    assert mlp_pixel.program.methods == {"forward": mlp_pixel.program.methods["forward"]}
    assert mlp_pixel.program.methods["forward"] > 0
    # not the file's name or path: a copy elsewhere has the same signature
    copy = tmp_path / "renamed.etrecord"
    shutil.copy(FIXTURES / "mlp_fp32" / "etrecord.bin", copy)
    assert program_signature(parse_etrecord(copy)) == mlp_pixel.program
    # saved and loaded, it stays
    mlp_pixel.save(tmp_path / "a.json")
    assert Analysis.load(tmp_path / "a.json").program == mlp_pixel.program


def test_the_signature_is_the_ops_and_their_order_only() -> None:
    a = signature_of_ops({"forward": ["aten.linear.default", "aten.relu.default"]})
    assert a == signature_of_ops({"forward": ["aten.linear.default", "aten.relu.default"]})
    assert a.sha256 != signature_of_ops({"forward": ["aten.relu.default", "aten.linear.default"]}).sha256
    assert a.sha256 != signature_of_ops({"forward": ["aten.linear.default", "aten.gelu.default"]}).sha256
    assert a.sha256 != signature_of_ops({"decode": ["aten.linear.default", "aten.relu.default"]}).sha256
    assert program_signature(None) is None


def test_two_analyses_of_one_program_pass(mlp_pixel: Analysis, mlp_host: Analysis, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    report = diff_analyses(mlp_pixel, mlp_host)
    assert report.passed and report.program_check == "same" and not report.coverage_failures
    matched, total = report.coverage["error"]
    assert matched == total > 0
    mlp_pixel.save(tmp_path / "a.json")
    mlp_host.save(tmp_path / "b.json")
    assert main(["diff", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("numdiff diff: no regression") and "warning" not in err


def test_different_programs_are_refused_with_exit_3(mlp_pixel: Analysis, cnn: Analysis, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(DifferentProgramsError, match="different programs"):
        diff_analyses(mlp_pixel, cnn)
    mlp_pixel.save(tmp_path / "a.json")
    cnn.save(tmp_path / "b.json")
    for fmt in ("table", "json", "markdown"):
        assert main(["diff", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--format", fmt]) == 3
        out, err = capsys.readouterr()
        assert out == ""
        assert len(err.strip().splitlines()) == 1  # one line: both sides, and what to do
        assert "model=mlp" in err and "model=cnn" in err and "different programs" in err
        assert mlp_pixel.program is not None and mlp_pixel.program.sha256[:12] in err
        assert "Compare two analyses of one program" in err


def _renamed(a: Analysis) -> Analysis:
    """``a`` with every op renamed: nothing in it matches the original."""
    assert a.gap is not None
    rows = [r.model_copy(update={"aot_ops": [f"other_{op}" for op in r.aot_ops]}) for r in a.gap.rows]
    blocks = [b.model_copy(update={"events": [e.model_copy(update={"name": f"other_{e.name}"}) for e in b.events]})
              for b in a.profile.blocks]
    return a.model_copy(update={"gap": a.gap.model_copy(update={"rows": rows}),
                                "profile": a.profile.model_copy(update={"blocks": blocks})})


def test_no_matched_op_fails_the_gate(mlp_pixel: Analysis, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    new = _renamed(mlp_pixel)
    report = diff_analyses(mlp_pixel, new)
    assert not report.passed and not report
    assert report.coverage["error"][0] == 0 and report.coverage_failures
    # even a share of 0 never passes a gate that compared nothing
    assert not diff_analyses(mlp_pixel, new, GateThresholds(min_matched_share=0.0)).passed
    mlp_pixel.save(tmp_path / "a.json")
    new.save(tmp_path / "b.json")
    assert main(["diff", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 1
    out = capsys.readouterr().out
    assert out.startswith("numdiff diff: FAILED, too little compared") and "no regression" not in out
    assert "FAILED: only 0 of the base's" in out
    assert main(["diff", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--format", "json"]) == 1
    assert '"passed": false' in capsys.readouterr().out


def test_half_matched_is_the_documented_share(mlp_pixel: Analysis) -> None:
    assert mlp_pixel.gap is not None
    rows = mlp_pixel.gap.rows
    half = (len(rows) + 1) // 2
    new = mlp_pixel.model_copy(update={"gap": mlp_pixel.gap.model_copy(update={"rows": rows[:half]})})
    report = diff_analyses(mlp_pixel, new)
    assert report.coverage["error"] == (half, len(rows))
    assert report.passed == (half >= 0.5 * len(rows))
    assert not diff_analyses(mlp_pixel, new, GateThresholds(min_matched_share=1.0)).passed


def test_a_base_with_nothing_to_compare_fails(mlp_pixel: Analysis) -> None:
    empty = mlp_pixel.model_copy(update={"gap": None, "gap_unavailable": "no debug buffer",
                                         "profile": mlp_pixel.profile.model_copy(update={"blocks": []})})
    report = diff_analyses(empty, empty)
    assert not report.passed and "nothing compared" in report.coverage_failures[0]
    assert "0 layers" in render_diff(report) and "FAILED" in render_diff(report)


def test_an_analysis_without_a_signature_is_compared_with_a_warning(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = Analysis.load(SAVED_ANALYSES / "analysis_v2.json")
    assert old.program is None  # the committed version-2 file still loads; it has no signature
    with pytest.warns(UserWarning, match="program not checked"):
        report = diff_analyses(old, old)
    assert report.program_check == "not checked" and any("program not checked" in n for n in report.notes)
    path = SAVED_ANALYSES / "analysis_v2.json"
    code = main(["diff", str(path), str(path)])
    out, err = capsys.readouterr()
    assert code == (0 if report.passed else 1)
    warning = [line for line in err.splitlines() if "warning" in line]
    assert len(warning) == 1 and "program not checked" in warning[0] and "base and new" in warning[0]


def test_the_json_and_the_loaded_graph_give_one_signature() -> None:
    """numdiff's reader hashes the Edge JSON; a record whose programs are loaded graphs (the reference's
    ETRecord) is hashed from the graph: both give the same signature for one program."""
    from numdiff.profile.symbolicate import op_nodes_from_graph

    record = parse_etrecord(FIXTURES / "cnn_nested" / "etrecord.bin")
    from_graph = signature_of_ops({m: [i.op_type for i in op_nodes_from_graph(p.graph_module)]
                                   for m, p in record.edge_programs.items()})
    signature = program_signature(record)
    assert signature is not None and signature.whole_sha256 is not None
    assert (signature.sha256, signature.methods) == (from_graph.sha256, from_graph.methods)
    # the ATen program's ops read from its JSON (not built) and from the built graph agree too
    built = parse_etrecord(FIXTURES / "cnn_nested" / "etrecord.bin")
    assert built.exported_program is not None
    assert program_signature(built) == signature


def test_one_model_lowered_for_two_backends_is_two_programs() -> None:
    """The ETRecord's Edge program is the one before partitioning, so one model lowered for the portable
    kernels and for XNNPACK can share the Edge signature (28 of the zoo's 144 programs, 7 architectures); the
    whole signature (ATen ops and the instructions as lowered) tells them apart, and the gate compares
    the fullest signature both have."""
    from numdiff.analysis.signature import same_program

    zoo = FIXTURES / "zoo" / "conv_bn"
    portable = program_signature(parse_etrecord(zoo / "int8_portable" / "etrecord.bin"))
    xnnpack = program_signature(parse_etrecord(zoo / "int8_xnnpack" / "etrecord.bin"))
    assert portable is not None and xnnpack is not None
    assert portable.whole_sha256 != xnnpack.whole_sha256 and not same_program(portable, xnnpack)
    # an analysis written before whole_sha256 existed is compared by the Edge signature alone
    older = portable.model_copy(update={"whole_sha256": None})
    assert same_program(portable, older)
    assert same_program(older, xnnpack.model_copy(update={"sha256": portable.sha256}))
