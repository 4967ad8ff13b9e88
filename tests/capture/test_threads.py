"""Reference graphs run with one intra-op thread unless NUMDIFF_REFERENCE_THREADS says otherwise,
and torch's own thread count is back after the run (also after a failed run)."""

from __future__ import annotations

import os

import pytest
import torch
from pytest import MonkeyPatch

from numdiff.capture import REFERENCE_THREADS_ENV, caller_threads, capture_intermediate_outputs, graph_threads
from numdiff.errors import CaptureError, UsageError


def _graph() -> torch.fx.GraphModule:
    gm = torch.fx.symbolic_trace(lambda x: torch.exp(x))
    next(n for n in gm.graph.nodes if n.op == "call_function").meta["debug_handle"] = 1
    return gm


def _threads_during_capture() -> int:
    seen: list[int] = []
    capture_intermediate_outputs(_graph(), [torch.zeros(2)],
                                 on_output=lambda h, n, v: seen.append(torch.get_num_threads()))
    return seen[0]


@pytest.fixture()
def two_threads():  # type: ignore[no-untyped-def]
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


@pytest.mark.usefixtures("two_threads")
@pytest.mark.parametrize(("setting", "during"), [(None, 1), ("", 1), ("0", 2), ("3", 3), ("1", 1)])
def test_the_graph_runs_with_the_threads_asked_for(monkeypatch: MonkeyPatch, setting: str | None, during: int) -> None:
    if setting is None:
        monkeypatch.delenv(REFERENCE_THREADS_ENV, raising=False)
    else:
        monkeypatch.setenv(REFERENCE_THREADS_ENV, setting)
    assert _threads_during_capture() == during
    assert torch.get_num_threads() == 2


@pytest.mark.usefixtures("two_threads")
def test_threads_are_restored_after_a_failed_run(monkeypatch: MonkeyPatch) -> None:
    monkeypatch.delenv(REFERENCE_THREADS_ENV, raising=False)
    with pytest.raises(CaptureError):
        capture_intermediate_outputs(_graph(), [torch.zeros(2)], on_output=lambda h, n, v: 1 / 0)
    assert torch.get_num_threads() == 2


@pytest.mark.parametrize("bad", ["-1", "two", "1.5"])
def test_a_bad_setting_is_a_usage_error(monkeypatch: MonkeyPatch, bad: str) -> None:
    monkeypatch.setenv(REFERENCE_THREADS_ENV, bad)
    with pytest.raises(UsageError, match=rf"{REFERENCE_THREADS_ENV}='{bad}' is not a whole number >= 0\nUnset it"):
        with graph_threads():
            pass


@pytest.mark.usefixtures("two_threads")
@pytest.mark.parametrize(("name", "view"), [("culprit_mlp", {}), ("deeper_taps", {"taps": "taps.json"}),
                                            ("deeper_decode", {"step_inputs": "step_inputs.pt"})])
def test_the_culprit_replays_run_with_one_thread(monkeypatch: MonkeyPatch, name: str, view: dict[str, str]) -> None:
    """find_culprits' replay (every decode step's too) and the taps view's replay run with one thread."""
    from numdiff.culprits._replay import ReplayInterpreter
    from tests.culprits.helpers import folder, inspector

    monkeypatch.delenv(REFERENCE_THREADS_ENV, raising=False)
    seen: list[int] = []
    run = ReplayInterpreter.run

    def recording(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(torch.get_num_threads())
        return run(self, *args, **kwargs)

    monkeypatch.setattr(ReplayInterpreter, "run", recording)
    inspector(name).find_culprits(**{k: str(folder(name) / v) for k, v in view.items()})
    assert len(seen) >= (2 if view else 1) and set(seen) == {1} and torch.get_num_threads() == 2


@pytest.mark.usefixtures("two_threads")
def test_caller_threads_is_the_users_setting_inside_numdiffs_one_thread_runs(monkeypatch: MonkeyPatch) -> None:
    """What the gap's helpers may use is the caller's setting, not the one thread numdiff runs graphs with."""
    monkeypatch.delenv(REFERENCE_THREADS_ENV, raising=False)
    assert caller_threads() == 2
    seen: list[tuple[int, int]] = []
    with graph_threads():
        seen.append((torch.get_num_threads(), caller_threads()))
        with graph_threads():  # nested: still the caller's, not numdiff's own 1
            seen.append((torch.get_num_threads(), caller_threads()))
        torch.set_num_threads(1)
        with graph_threads():
            seen.append((torch.get_num_threads(), caller_threads()))
        torch.set_num_threads(2)
    assert seen == [(1, 2), (1, 2), (1, 2)]
    assert caller_threads() == 2
    torch.set_num_threads(1)
    assert caller_threads() == 1
    with graph_threads():
        assert caller_threads() == 1


@pytest.mark.usefixtures("two_threads")
def test_caller_threads_is_reset_when_the_block_fails(monkeypatch: MonkeyPatch) -> None:
    from numdiff.gap.presum import worker_threads

    monkeypatch.delenv(REFERENCE_THREADS_ENV, raising=False)
    with pytest.raises(ZeroDivisionError):
        with graph_threads():
            assert torch.get_num_threads() == 1 and caller_threads() == 2
            # the gap's helpers inside numdiff's own one-thread run still see the caller's two threads
            assert worker_threads() == (1 if len(os.sched_getaffinity(0)) > 1 else 0)
            1 / 0
    assert torch.get_num_threads() == 2 and caller_threads() == 2
    torch.set_num_threads(1)
    assert caller_threads() == 1
