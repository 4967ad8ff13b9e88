"""numdiff's ``memory.alloc`` stand-in: runs, survives copies, and equals ExecuTorch's by name only."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import torch

from numdiff.program.graph_args import alloc


def _named(module: str, name: str) -> Any:
    def function(spec: Any) -> Any:
        return spec

    function.__module__, function.__name__ = module, name
    return function


def test_alloc_makes_empty_tensors_for_one_or_several_specs() -> None:
    one = alloc(((2, 3), torch.float16))
    several = alloc([((1,), torch.int32), ((4, 1), torch.float32)])
    assert (one.shape, one.dtype) == (torch.Size([2, 3]), torch.float16)
    assert [(t.shape, t.dtype) for t in several] == [(torch.Size([1]), torch.int32), (torch.Size([4, 1]), torch.float32)]


def test_alloc_equals_the_reference_function_by_module_and_name() -> None:
    reference = _named("executorch.exir.memory", "alloc")
    assert reference == alloc and alloc == reference  # the reference's function is on the left in its tests
    assert alloc != _named("executorch.exir.memory", "free")
    assert alloc != _named("some.other.module", "alloc")
    assert alloc != "alloc"


def test_alloc_is_kept_by_pickle_and_deepcopy() -> None:
    assert pickle.loads(pickle.dumps(alloc)) is alloc
    assert copy.deepcopy(alloc) is alloc
    assert hash(copy.copy(alloc)) == hash(alloc)
