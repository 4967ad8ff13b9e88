"""Telling the methods of a multi-method program apart (the runtime names every block "Execute")."""

from __future__ import annotations

from typing import Any

from numdiff.profile.symbolicate import OpNode
from numdiff.profile.events import Event, EventBlock
from numdiff.profile.methods import assign_methods, ops_agree
from numdiff.program.graph_meta import OpNodeInfo


def _nodes(*ops: str) -> dict[Any, list[OpNode]]:
    return {h: [OpNode(OpNodeInfo(f"n{h}", op, h, None, None, None))] for h, op in enumerate(ops)}


def _block(*kernels: str) -> EventBlock:
    events = [Event(f"native_call_{k}.out", _instruction_id=i) for i, k in enumerate(kernels)]
    return EventBlock("Execute", events + [Event("Method::execute", _instruction_id=0)])


HANDLES = {"0": 0, "1": 1}


def test_each_block_gets_the_method_whose_ops_its_kernels_run() -> None:
    init = EventBlock("Default", [Event("Method::init", _instruction_id=0)])
    blocks = [init, _block("addmm", "tanh"), _block("addmm", "sigmoid")]
    notes = assign_methods(blocks, {"encode": HANDLES, "forward": HANDLES},
                           {"encode": _nodes("aten.addmm.default", "aten.tanh.default"),
                            "forward": _nodes("aten.addmm.default", "aten.sigmoid.default")})
    assert [b.method_name for b in blocks] == [None, "encode", "forward"]
    assert [b.name for b in blocks] == ["Default", "Execute", "Execute"]
    assert notes == []


def test_identical_methods_leave_the_block_undecided_with_a_note() -> None:
    blocks = [_block("addmm", "tanh")]
    same = _nodes("aten.addmm.default", "aten.tanh.default")
    notes = assign_methods(blocks, {"a": HANDLES, "b": HANDLES}, {"a": same, "b": same})
    assert blocks[0].method_name is None
    assert len(notes) == 1 and "fit methods ['a', 'b'] equally" in notes[0]


def test_one_method_needs_no_matching() -> None:
    blocks = [_block("anything")]
    assert assign_methods(blocks, {"forward": {}}, {"forward": None}) == []
    assert blocks[0].method_name == "forward"


def test_kernel_names_are_matched_by_op_base_name() -> None:
    assert ops_agree("native_call_convolution.out", ["aten.convolution.default"])
    assert ops_agree("native_call_add.out", ["aten.add.Tensor"])
    assert not ops_agree("native_call_tanh.out", ["aten.sigmoid.default"])
