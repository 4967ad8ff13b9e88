"""A culprit explained by a known device deviation, verified by a replay (numdiff.culprits._deviations).

XNNPACK (ExecuTorch 1.5.1) computes ``gelu(approximate="tanh")`` as the exact GELU: T5's and Gemma's
delegates were culprits at 70-95 dB on every clean run of the held-out zoos, and matched an exact-GELU
graph at 136-143 dB. The culprit stays; its note says why, once a replay with the GELU exact agrees.
"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
import torch

from numdiff.culprits._deviations import explain_deviations, tanh_gelus
from numdiff.culprits._noise import Verdict
from numdiff.culprits.report import DEVICE_DEVIATION, CulpritRow
from tests.culprits.helpers import inspector, report

_SAID = re.compile(r"device deviation, verified: XNNPACK computes gelu\(approximate='tanh'\) as the exact GELU "
                   r"\(replayed with approximate='none' at node (\w+), the runtime matches it at local ([\d.]+), "
                   r"([\d.e-]+) noise units, (ok|expected-noise)\)")


@pytest.mark.parametrize("reference", [None, "edge_dialect_exported_program"])
def test_the_tanh_gelu_culprit_on_xnnpack_says_the_device_computes_the_exact_gelu(reference: str | None) -> None:
    rep = report("culprit_xnnpack_gelu_tanh") if reference is None else \
        inspector("culprit_xnnpack_gelu_tanh").find_culprits("SNR", reference_graph=reference)
    (row,) = rep.rows
    assert row.is_culprit and row.verdict is Verdict.SUSPICIOUS  # the device does not compute the model as written
    assert row.local_gap < 80 and row.local_noise_units > 50  # the row's own figures are the tanh graph's
    found = _SAID.search(row.note or "")
    assert found is not None, row.note
    assert "gelu" in found[1] and float(found[2]) > 130 and float(found[3]) < 1  # fixture: 140.5 dB, 0.043 units
    assert str(rep).splitlines()[-1] == f"  {found[0]}"  # shown under the culprit (CLI table output too)


def test_a_model_with_the_exact_gelu_gets_no_such_note() -> None:
    rep = report("culprit_clean_xnnpack_gelu")
    assert not rep.culprits
    assert all(DEVICE_DEVIATION not in (r.note or "") for r in rep.rows)
    assert DEVICE_DEVIATION not in str(rep)


def _gelu_module(approximate: object, positional: bool = False) -> torch.fx.GraphModule:
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    gelu = graph.call_function(torch.ops.aten.gelu.default, (x, approximate) if positional else (x,),
                               {} if positional else {"approximate": approximate}, name="gelu")
    graph.output(gelu)
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def _culprit_row() -> CulpritRow:
    """The fixture's culprit row, pointing at the test graph's ``gelu``."""
    return replace(report("culprit_xnnpack_gelu_tanh").rows[0], node="gelu", replayed_ops=(), note="before")


def test_a_culprit_whose_exact_gelu_replay_does_not_fit_gets_no_note() -> None:
    module, row = _gelu_module("tanh"), _culprit_row()
    seen: list[object] = []

    def replay(alternative: torch.fx.GraphModule) -> list[CulpritRow]:
        seen.extend(n.kwargs.get("approximate") for n in alternative.graph.nodes if n.op == "call_function")
        return [replace(row, verdict=Verdict.SUSPICIOUS, local_noise_units=40.0, local_gap=90.0)]

    rows = [row]
    assert explain_deviations(rows, module, replay) == rows and rows[0].note == "before"
    assert seen == ["none"]  # replayed once, on a copy with the GELU exact
    assert [n.kwargs.get("approximate") for n in module.graph.nodes if n.op == "call_function"] == ["tanh"]


def test_only_culprit_xnnpack_rows_holding_a_literal_tanh_gelu_are_replayed_again() -> None:
    row = _culprit_row()

    def never(alternative: torch.fx.GraphModule) -> list[CulpritRow]:
        raise AssertionError("no second replay expected")

    for module, r in [(_gelu_module("tanh"), replace(row, is_culprit=False, verdict=Verdict.OK)),
                      (_gelu_module("tanh"), replace(row, delegate=None)),  # a portable gelu: computed as written
                      (_gelu_module("tanh"), replace(row, delegate="QnnBackend #1: linear")),
                      (_gelu_module("none"), row),
                      (_gelu_module("none", positional=True), row)]:
        assert explain_deviations([r], module, never) == [r]
    assert tanh_gelus(_gelu_module("tanh", positional=True).graph, [row]) == {0: ("gelu",)}
    named = _gelu_module("tanh")  # an argument that is not the literal (a node) is never resolved
    (gelu,) = [n for n in named.graph.nodes if n.op == "call_function"]
    gelu.kwargs = {"approximate": next(iter(named.graph.nodes))}
    assert tanh_gelus(named.graph, [row]) == {}


def test_the_cli_shows_the_deviation_under_the_culprit_and_still_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    from numdiff.cli import main
    from tests.culprits.helpers import folder

    d = folder("culprit_xnnpack_gelu_tanh")
    assert main(["culprits", "--etdump", str(d / "etdump.etdp"), "--etrecord", str(d / "etrecord.bin"),
                 "--debug-buffer", str(d / "debug_buffer.bin"), "--width", "400"]) == 1
    out = capsys.readouterr().out
    assert "CULPRIT" in out and _SAID.search(out) is not None
    assert "taps localize" not in out  # the deviation already names the op inside the delegate
