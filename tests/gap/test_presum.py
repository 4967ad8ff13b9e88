"""Sums computed while the reference graph runs (numdiff.gap.presum) give the very numbers of the scoring loop."""

from __future__ import annotations

import math
import threading
import warnings
from typing import Any

import pandas as pd
import pytest
import torch

import numdiff.comparators.numerics as numerics
from numdiff.gap.presum import worker_threads
from numdiff.inspector import Inspector
from tests.conftest import artifact

FIXTURES = ["mlp_fp32", "cnn_nested", "attention_view", "xnnpack"]
#: Fixtures with pairs whose handle is the same on both sides and shared with no other (computed ahead);
#: xnnpack's one pair is a delegate's output, paired after the graph has run.
AHEAD = {"mlp_fp32", "cnn_nested", "attention_view"}


def _gap(name: str, metric: str) -> pd.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        inspector = Inspector(etdump_path=artifact(name, "etdump"), etrecord=artifact(name, "etrecord"),
                              debug_buffer_path=artifact(name, "debug_buffer"))
        return inspector.calculate_numeric_gap(metric)


def _gaps(df: pd.DataFrame) -> list[float]:
    return [g for gap in df["gap"] for g in (gap if isinstance(gap, list) else [gap])]


def _same(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(x == y or (math.isnan(x) and math.isnan(y)) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("name", FIXTURES)
@pytest.mark.parametrize("metric", ["SNR", "MSE", "L1"])
def test_presummed_gap_equals_the_scoring_loops(name: str, metric: str, threads: None, computed_on: list[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    torch.set_num_threads(1)
    inline = _gap(name, metric)
    inline_names = list(computed_on)
    computed_on.clear()
    torch.set_num_threads(2)
    worker = _gap(name, metric)
    worker_names = list(computed_on)
    computed_on.clear()
    monkeypatch.setattr(numerics, "difference_sums_l1", lambda comparator: None)  # nothing computed ahead
    plain = _gap(name, metric)
    assert _same(_gaps(inline), _gaps(plain)) and _same(_gaps(worker), _gaps(plain))
    # no pair's sums are computed twice, and one thread asked for is one thread used
    assert len(inline_names) == len(worker_names) == len(computed_on) > 0
    assert set(inline_names) == {threading.current_thread().name}
    if worker_threads():  # a machine with one core has no worker
        assert any(n.startswith("numdiff-gap-sums") for n in worker_names) == (name in AHEAD)


def test_one_thread_means_no_worker(threads: None) -> None:
    torch.set_num_threads(1)
    assert worker_threads() == 0
    torch.set_num_threads(2)
    assert worker_threads() == (1 if len(__import__("os").sched_getaffinity(0)) > 1 else 0)


def test_a_custom_metric_is_not_computed_ahead(computed_on: list[str]) -> None:
    from numdiff.comparators import SNRComparator

    class Halved(SNRComparator):
        def element_compare(self, a: Any, b: Any) -> float:
            return super().element_compare(a, b) / 2

    df = _gap("mlp_fp32", Halved())  # type: ignore[arg-type]
    assert computed_on and set(computed_on) == {threading.current_thread().name}  # in the scoring loop only
    plain = _gap("mlp_fp32", "SNR")
    assert _same(_gaps(df), [g / 2 for g in _gaps(plain)])


def test_inference_mode_tensors_are_scored_in_the_loop(computed_on: list[str]) -> None:
    """Tensors made under torch.inference_mode keep no change counter: nothing is answered from sums taken earlier."""
    plain = _gap("mlp_fp32", "SNR")
    computed_on.clear()
    with torch.inference_mode():
        df = _gap("mlp_fp32", "SNR")
    assert _same(_gaps(df), _gaps(plain))
    assert threading.current_thread().name in computed_on


@pytest.mark.skipif(len(__import__("os").sched_getaffinity(0)) < 2, reason="needs two cores")
@pytest.mark.parametrize(("quota", "workers"), [(None, 1), (4.0, 1), (2.0, 1), (1.5, 0), (1.0, 0)])
def test_a_cpu_quota_below_two_cpus_keeps_the_gap_on_one_thread(quota: float | None, workers: int, threads: None,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A container sees every core but its quota may buy one: a worker would only compete for it."""
    import numdiff._core.cgroup as cgroup

    monkeypatch.setattr(cgroup, "cpu_limit", lambda: quota)
    torch.set_num_threads(2)
    assert worker_threads() == workers
