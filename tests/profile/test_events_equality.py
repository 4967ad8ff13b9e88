"""Event, EventBlock and PerfData compare by value and are unhashable, as the reference's dataclasses."""

from __future__ import annotations

import copy
import dataclasses
import warnings
from collections.abc import Hashable

import numpy as np
import pytest
import torch

from numdiff import Event, EventBlock, Inspector, PerfData
from tests.conftest import FIXTURES

MLP = FIXTURES / "mlp_fp32"


def _inspector() -> Inspector:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Inspector(etdump_path=str(MLP / "etdump.etdp"), etrecord=str(MLP / "etrecord.bin"),
                         debug_buffer_path=str(MLP / "debug_buffer.bin"))


def test_two_inspectors_on_the_same_files_have_equal_records() -> None:
    a, b = _inspector(), _inspector()
    tensors = [t for blk in a.event_blocks for ev in blk.events for t in ev.debug_data if isinstance(t, torch.Tensor)]
    assert any(t.numel() > 1 for t in tensors)  # the reference's generated __eq__ would raise on these
    assert a.event_blocks == b.event_blocks
    for x, y in zip(a.event_blocks, b.event_blocks, strict=True):
        assert x == y and not x != y
        for ex, ey in zip(x.events, y.events, strict=True):
            assert ex == ey
            assert ex.perf_data == ey.perf_data


def test_a_changed_field_makes_records_differ() -> None:
    a, b = _inspector(), _inspector()
    block_a, block_b = a.event_blocks[-1], b.event_blocks[-1]
    ev = next(e for e in block_b.events if e.debug_data)
    ev.debug_data = [t + 1 if isinstance(t, torch.Tensor) else t for t in ev.debug_data]
    assert block_a != block_b
    assert block_a.events[block_b.events.index(ev)] != ev

    c = _inspector().event_blocks[-1]
    c.events[0].op_types = ["something_else"]
    assert c != block_a
    d = _inspector().event_blocks[-1]
    d.method_name = "encode"
    assert d != block_a


def test_records_are_unhashable_like_the_reference() -> None:
    block = _inspector().event_blocks[-1]
    perf = next(e.perf_data for e in block.events if e.perf_data is not None)
    for record in (block, block.events[0], perf):
        assert not isinstance(record, Hashable)
        with pytest.raises(TypeError, match="unhashable"):
            hash(record)


def test_perf_data_compares_samples() -> None:
    assert PerfData([1.0, 2.0]) == PerfData([1.0, 2.0])
    assert PerfData([1.0, 2.0]) != PerfData([1.0, 3.0])
    assert PerfData([float("nan")]) != PerfData([float("nan")])


def test_tensor_and_array_values_compare_by_dtype_shape_and_elements() -> None:
    assert Event("e", debug_data=[torch.ones(2, 3)]) == Event("e", debug_data=[torch.ones(2, 3)])
    assert Event("e", debug_data=[torch.ones(2, 3)]) != Event("e", debug_data=[torch.ones(3, 2)])
    assert Event("e", debug_data=[torch.ones(3)]) != Event("e", debug_data=[torch.ones(3, dtype=torch.float64)])
    assert Event("e", debug_data=[torch.ones(3)]) != Event("e", debug_data=[np.ones(3, dtype=np.float32)])
    assert Event("e", debug_data=[np.arange(4)]) == Event("e", debug_data=[np.arange(4)])
    nan = torch.tensor([float("nan"), 1.0])
    assert Event("e", debug_data=[nan]) == Event("e", debug_data=[nan])  # same object, as a tuple compare
    assert Event("e", debug_data=[nan]) != Event("e", debug_data=[nan.clone()])
    assert Event("e", debug_data=[[torch.ones(2), torch.zeros(2)]]) == Event("e", debug_data=[[torch.ones(2), torch.zeros(2)]])


def test_per_run_loaders_are_not_compared() -> None:
    a = Event("e", perf_data=PerfData([1.0]))
    b = dataclasses.replace(a, _run_debug_data=(lambda: [torch.ones(1)],))
    assert a == b
    assert copy.copy(a) == a
    assert a != "e" and EventBlock("Execute") != "Execute"
