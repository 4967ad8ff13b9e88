"""resolve_reference_graph: the reference's naming rules, fallbacks and errors."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest
import torch
from capture_helpers import handles_by_name, mlp_pair

from numdiff.capture.graphs import resolve_reference_graph
from numdiff.errors import MissingDataError, UsageError


def _handles(gm: torch.fx.GraphModule) -> dict[str, object]:
    return {n.name: n.meta["debug_handle"] for n in gm.graph.nodes if "debug_handle" in n.meta}


def _break_propagation(pair: object) -> None:
    edge = pair.edge_dialect_program  # type: ignore[attr-defined]
    del next(n for n in edge.graph.nodes if n.name == "relu").meta["from_node"]


def test_default_is_aten_when_back_propagation_succeeds() -> None:
    pair = mlp_pair()
    gm, name = resolve_reference_graph(pair)
    assert name == "exported_program"
    assert _handles(gm) == {"linear": 1, "relu": 2, "linear_1": 3, "softmax": 4}
    assert pair.exported_program is not None
    assert handles_by_name(pair.exported_program)["linear"] == 1  # written in place, as the reference does


def test_default_falls_back_to_edge_with_warning(caplog: pytest.LogCaptureFixture) -> None:
    pair = mlp_pair()
    _break_propagation(pair)
    with caplog.at_level(logging.WARNING, logger="numdiff.capture.graphs"):
        gm, name = resolve_reference_graph(pair)
    assert name == "edge_dialect_exported_program"
    assert "relu (handle 2)" in caplog.text and "disable_debug_handle_validation" in caplog.text
    # the reference's own sentence, word for word (users search their logs for it)
    assert ("Either ATen dialect exported program is not in ETRecord, or debug handle backpropagation failed. "
            "Falling back to 'edge_dialect_exported_program'.") in caplog.text
    assert "addmm" in _handles(gm)


def test_default_without_aten_program_uses_edge(caplog: pytest.LogCaptureFixture) -> None:
    pair = mlp_pair()
    pair.exported_program = None
    with caplog.at_level(logging.WARNING, logger="numdiff.capture.graphs"):
        assert resolve_reference_graph(pair)[1] == "edge_dialect_exported_program"
    assert "no ATen exported_program" in caplog.text


def test_explicit_aten_failing_is_a_usage_error_naming_the_opt_out() -> None:
    pair = mlp_pair()
    _break_propagation(pair)
    with pytest.raises(UsageError, match=r"(?s)^Cannot use 'exported_program': debug handle backpropagation failed "
                                          r"\(.*relu.*disable_debug_handle_validation=True") as info:
        resolve_reference_graph(pair, "exported_program")
    assert isinstance(info.value, ValueError)  # the reference raises ValueError
    gm, name = resolve_reference_graph(pair, "exported_program", disable_debug_handle_validation=True)
    assert name == "exported_program"
    assert _handles(gm)["relu"] == 0


def test_explicit_aten_missing_is_missing_data() -> None:
    pair = mlp_pair()
    pair.exported_program = None
    with pytest.raises(MissingDataError, match="no ATen exported_program"):
        resolve_reference_graph(pair, "exported_program")


def test_explicit_edge() -> None:
    pair = mlp_pair()
    gm, name = resolve_reference_graph(pair, "edge_dialect_exported_program")
    assert name == "edge_dialect_exported_program"
    assert _handles(gm)["addmm"] == 1
    assert pair.exported_program is not None
    assert handles_by_name(pair.exported_program)["linear"] is None  # no back-propagation done


def test_edge_missing() -> None:
    pair = mlp_pair()
    pair.edge_dialect_program = None
    with pytest.raises(MissingDataError, match="no Edge program"):
        resolve_reference_graph(pair, "edge_dialect_exported_program")


def test_edge_dict_uses_forward() -> None:
    pair = mlp_pair()
    pair.edge_dialect_program = {"forward": pair.edge_dialect_program}
    assert resolve_reference_graph(pair)[1] == "exported_program"
    pair.edge_dialect_program = {"encode": pair.edge_dialect_program["forward"]}
    with pytest.raises(UsageError, match=r"\['encode'\], none named 'forward'"):
        resolve_reference_graph(pair, "edge_dialect_exported_program")


@pytest.mark.parametrize(("asked", "key"), [("after_transform", "after_transform/forward"), ("other/encode", "other/encode")])
def test_graph_map_lookup(asked: str, key: str) -> None:
    pair = mlp_pair()
    pair.graph_map = {key: pair.edge_dialect_program}
    gm, name = resolve_reference_graph(pair, asked)
    assert name == key
    assert "addmm" in _handles(gm)


def test_unknown_name_lists_choices() -> None:
    pair = mlp_pair()
    pair.graph_map = {"a/forward": pair.edge_dialect_program}
    with pytest.raises(UsageError, match=r"'nope/forward' not found.*\n.*graph_map name \('a/forward'\)"):
        resolve_reference_graph(pair, "nope")
    pair.graph_map = None
    with pytest.raises(UsageError, match=r"graph_map name \(this ETRecord has none\)"):
        resolve_reference_graph(pair, "nope/forward")


def test_returned_module_is_a_fresh_copy_and_second_call_works() -> None:
    pair = mlp_pair()
    gm1, _ = resolve_reference_graph(pair)
    for node in gm1.graph.nodes:
        node.meta["debug_handle"] = 42
    gm2, name = resolve_reference_graph(pair)
    assert gm1 is not gm2 and name == "exported_program"
    assert _handles(gm2) == {"linear": 1, "relu": 2, "linear_1": 3, "softmax": 4}


def test_import_numdiff_does_not_import_capture() -> None:
    code = "import sys, numdiff; assert 'numdiff.capture' not in sys.modules, sorted(sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True)
