"""find_culprits takes the accumulated sums as the reference graph runs (numdiff.gap.presum): on the gap's
worker when the caller allows several threads, and the report is the very one computed after the graph."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pandas as pd
import pytest
import torch

import numdiff.comparators.numerics as numerics
import numdiff.culprits.find as find
from numdiff.gap.presum import Presum, worker_threads
from tests.culprits.helpers import inspector

NAMES = ["culprit_mlp", "cnn_nested"]


@pytest.fixture
def computed_on(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Names of the threads each pair's sums were computed on; torch's thread count restored after."""
    names: list[str] = []
    real = numerics._difference_sums

    def spy(a: object, b: object, need_l1: bool) -> Any:
        names.append(threading.current_thread().name)
        return real(a, b, need_l1)

    monkeypatch.setattr(numerics, "_difference_sums", spy)
    before = torch.get_num_threads()
    yield names
    torch.set_num_threads(before)


def _frame(name: str) -> pd.DataFrame:
    return inspector(name).find_culprits().to_dataframe()


@pytest.mark.parametrize("name", NAMES)
def test_the_report_is_the_same_with_the_sums_taken_ahead(name: str, computed_on: list[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    torch.set_num_threads(2)
    ahead = _frame(name)
    on_worker = [n for n in computed_on if n.startswith("numdiff-gap-sums")]
    computed_on.clear()
    torch.set_num_threads(1)
    inline = _frame(name)
    inline_threads = set(computed_on)

    @contextmanager
    def nothing_ahead(need_l1: bool | None, release: Any) -> Iterator[Presum]:
        yield Presum(None, release)

    monkeypatch.setattr(find, "presumming", nothing_ahead)
    after = _frame(name)
    pd.testing.assert_frame_equal(ahead, after)
    pd.testing.assert_frame_equal(inline, after)
    # one thread asked for is one thread used; with two, the sums went to the worker
    assert inline_threads == {threading.current_thread().name}
    torch.set_num_threads(2)
    if worker_threads():
        assert on_worker, "no pair's sums were computed on the gap's worker"
