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

import numdiff.culprits.find as find
from numdiff.gap.presum import Presum, worker_threads
from tests.culprits.helpers import inspector

NAMES = ["culprit_mlp", "cnn_nested"]


def _report(name: str, metric: str = "SNR") -> tuple[pd.DataFrame, str]:
    report = inspector(name).find_culprits(metric)
    return report.to_dataframe(), repr(report.rows)  # the rows carry what the frame leaves out (rel, rms)


@pytest.mark.parametrize("name", NAMES)
def test_the_report_is_the_same_with_the_sums_taken_ahead(name: str, computed_on: list[str], threads: None,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    torch.set_num_threads(2)
    ahead = _report(name)
    ahead_threads = list(computed_on)
    computed_on.clear()
    torch.set_num_threads(1)
    inline = _report(name)
    inline_threads = list(computed_on)
    computed_on.clear()

    @contextmanager
    def nothing_ahead(need_l1: bool | None, release: Any) -> Iterator[Presum]:
        yield Presum(None, release)

    monkeypatch.setattr(find, "presumming", nothing_ahead)
    after = _report(name)
    after_threads = list(computed_on)
    for report in (ahead, inline):
        pd.testing.assert_frame_equal(report[0], after[0], check_exact=True)
        assert report[1] == after[1]
    # each pair's sums are computed once, ahead (the scoring found them): no more calls than without
    assert len(ahead_threads) == len(inline_threads) == len(after_threads) > 0
    # one thread asked for is one thread used; with two, the sums went to the worker
    assert set(inline_threads) == {threading.current_thread().name}
    torch.set_num_threads(2)
    if worker_threads():
        # the accumulated sums on the gap's worker, the replay's local ones on the replay's
        assert any(n.startswith("numdiff-gap-sums") for n in ahead_threads), ahead_threads
        assert any(n.startswith("numdiff-replay-sums") for n in ahead_threads), ahead_threads


@pytest.mark.skipif(len(__import__("os").sched_getaffinity(0)) < 2, reason="needs two cores")
def test_a_graph_that_changes_values_in_place_keeps_its_local_sums_on_this_thread(
        computed_on: list[str], threads: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A later node could change a replayed value while another thread reads it: no replay pool then."""
    torch.set_num_threads(2)
    import numdiff.capture as capture

    monkeypatch.setattr(capture, "runs_without_side_effects", lambda module: False)
    before = _report("culprit_mlp")
    assert not any(n.startswith("numdiff-replay-sums") for n in computed_on), computed_on
    monkeypatch.undo()
    torch.set_num_threads(2)
    assert _report("culprit_mlp")[1] == before[1]


@pytest.mark.parametrize("metric", ["SNR", "cosine"])
def test_every_runtime_value_scored_is_let_go_whatever_the_metric(metric: str, threads: None,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A metric other than SNR reads the runtime tensor again after its sums were taken ahead: its
    pages must be dropped after that read too (they were kept for the whole replay)."""
    from numdiff.schema.debug_buffer import DebugBuffer

    released: list[int] = []
    real = DebugBuffer.release

    def spy(self: DebugBuffer, value: object) -> None:
        released.extend(t.data_ptr() for t in (value if isinstance(value, (list, tuple)) else [value])
                        if isinstance(t, torch.Tensor))
        real(self, value)

    monkeypatch.setattr(DebugBuffer, "release", spy)
    seen: list[int] = []
    score = find.score_accumulated

    def scoring(items: list[Any], meter: Any, release: Any, *args: Any) -> None:
        seen.extend(item.pair.runtime_output.data_ptr() for item in items
                    if isinstance(item.pair.runtime_output, torch.Tensor))
        released.clear()  # what counts is what is let go once scoring is over
        score(items, meter, release, *args)
        missing = set(seen) - set(released)
        if metric == "SNR":  # the sums alone: the worker let the pages go once it had read them
            return
        assert not missing, f"{len(missing)} of {len(seen)} runtime values kept after scoring with {metric}"

    monkeypatch.setattr(find, "score_accumulated", scoring)
    torch.set_num_threads(2)
    inspector("culprit_mlp").find_culprits(metric)
    assert seen
