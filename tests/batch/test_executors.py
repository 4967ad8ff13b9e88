"""Executors: argument errors, a worker that dies, failures inside a worker, Ray missing."""

from __future__ import annotations

import os
import sys

import pytest

from numdiff.batch import runner
from numdiff.batch.executors import WorkerDied, run_pool, run_tasks
from numdiff.errors import MissingDependencyError, UsageError


def double_or_die(x: int) -> int:
    if x == 3:
        os._exit(7)  # a worker killed mid-task (OOM killer, segfault)
    return 2 * x


def test_a_dead_worker_fails_its_task_only() -> None:
    results = dict(run_pool(double_or_die, list(range(8)), workers=2))
    assert isinstance(results[3], WorkerDied) and "worker process died" in str(results[3])
    survivors = {k: v for k, v in results.items() if not isinstance(v, BaseException)}
    assert survivors and all(v == 2 * k for k, v in survivors.items())
    assert len(results) == 8


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"backend": "spark"}, r"unknown backend 'spark'"),
    ({"workers": 0}, r"--workers 0 is not a positive number"),
    ({"address": "auto"}, r"--address goes with --backend ray"),
])
def test_bad_arguments(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(UsageError, match=match):
        run_tasks(double_or_die, [1], **kwargs)  # type: ignore[arg-type]


def test_ray_missing_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(MissingDependencyError, match=r"pip install -c constraints.txt -e '\.\[ray\]'"):
        list(run_tasks(double_or_die, [1], backend="ray"))


def test_a_bug_while_analysing_is_an_outcome(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(task: runner.Task) -> None:
        raise KeyError("oops")

    monkeypatch.setattr(runner, "_analyse", boom)
    task = runner.Task("r", "k", "x.etdp", None, None, {}, runner.ANALYSES)
    outcome = runner.analyse_task(task)
    assert outcome.status == "failed" and outcome.error_type == "KeyError"
    assert outcome.error is not None and outcome.error.startswith("internal error: 'oops'")


def test_parse_analyses() -> None:
    assert runner.parse_analyses("gap") == ("profile", "gap")
    with pytest.raises(UsageError, match=r"unknown analysis 'speed'"):
        runner.parse_analyses("profile,speed")


def test_a_local_ray_is_kept_on_loopback_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 22: `numdiff batch --backend ray` started a local Ray listening on the external address."""
    from numdiff.batch.executors import local_ray_on_loopback

    monkeypatch.delitem(sys.modules, "ray", raising=False)  # not imported yet, as in `numdiff batch`
    monkeypatch.delenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", raising=False)
    assert not local_ray_on_loopback("ray://head:10001")  # a cluster: Ray's own choice
    assert "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER" not in os.environ
    assert local_ray_on_loopback(None) and os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] == "0"
    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "1")  # told otherwise
    assert not local_ray_on_loopback(None) and os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] == "1"
