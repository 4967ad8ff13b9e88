"""Trace export, validated against the Trace Event format's rules (JSON object form).

Rules checked (from the format's specification): the top level is an object whose
``traceEvents`` is a list and whose ``displayTimeUnit`` is "ms" or "ns"; every event has a
string ``name`` and ``ph``, integer ``pid`` and ``tid``; complete events ("X") have numeric
``ts`` and ``dur`` >= 0 (µs); counter events ("C") have ``ts`` and an ``args`` object of numbers;
metadata events ("M") named process_name / thread_name carry ``args.name``; and on one thread,
complete events nest: two slices are either disjoint or one contains the other.
"""

from __future__ import annotations

import json
import math
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from numdiff.cli import main
from numdiff.report import Analysis
from numdiff.report.trace import trace_events
from tests.conftest import FIXTURES
from tests.conftest import SAVED_ANALYSES as DATA

_PHASES = {"X", "C", "M", "B", "E", "i", "I"}


def validate(trace: Any) -> list[dict[str, Any]]:
    assert isinstance(trace, dict)
    assert isinstance(trace["traceEvents"], list)
    assert trace.get("displayTimeUnit", "ms") in ("ms", "ns")
    by_thread: dict[tuple[int, int], list[tuple[float, float]]] = defaultdict(list)
    for ev in trace["traceEvents"]:
        assert isinstance(ev["name"], str) and ev["ph"] in _PHASES, ev
        assert isinstance(ev["pid"], int) and isinstance(ev["tid"], int), ev
        if ev["ph"] == "M":
            assert ev["name"] in ("process_name", "thread_name", "thread_sort_index", "process_sort_index"), ev
            if ev["name"].endswith("_name"):
                assert isinstance(ev["args"]["name"], str)
            continue
        assert isinstance(ev["ts"], (int, float)) and math.isfinite(ev["ts"]), ev
        if ev["ph"] == "X":
            assert isinstance(ev["dur"], (int, float)) and ev["dur"] >= 0, ev
            by_thread[(ev["pid"], ev["tid"])].append((ev["ts"], ev["ts"] + ev["dur"]))
        if ev["ph"] == "C":
            assert ev["args"] and all(isinstance(v, (int, float)) and math.isfinite(v) for v in ev["args"].values()), ev
    for spans in by_thread.values():
        spans.sort(key=lambda s: (s[0], -s[1]))
        stack: list[float] = []
        for start, end in spans:
            while stack and stack[-1] <= start:
                stack.pop()
            assert not stack or end <= stack[-1], f"slice {start}-{end} straddles its parent ending at {stack[-1]}"
            stack.append(end)
    return trace["traceEvents"]  # type: ignore[no-any-return]


def _slices(events: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e for e in events if e["ph"] == "X" and e["name"] == name]


def test_example_trace_nests_delegate_ops_and_carries_error(example_analysis: Analysis) -> None:
    trace = trace_events(example_analysis)
    events = validate(json.loads(json.dumps(trace, allow_nan=False)))
    threads = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert sorted(threads.values()) == ["Default run 0", "Execute run 0"]
    calls = _slices(events, "DELEGATE_CALL")
    assert len(calls) == 2 and all(c["args"]["delegate"] == "XnnpackBackend" for c in calls)
    inside = [e for e in events if e["ph"] == "X" and e["cat"] == "delegate"]
    assert inside and all(any(c["tid"] == e["tid"] and c["ts"] <= e["ts"] and e["ts"] + e["dur"] <= c["ts"] + c["dur"]
                              for c in calls) for e in inside)
    cumsum = _slices(events, "native_call_cumsum.out")[0]
    assert cumsum["args"]["aot_ops"] == ["cumsum"] and cumsum["args"]["snr_db"][0] == pytest.approx(150.9, abs=0.1)
    counters = [e for e in events if e["ph"] == "C"]
    assert [c["args"]["snr_db"] for c in counters] == [pytest.approx(150.9, abs=0.1)]  # infinite SNR is in args only
    assert calls[0]["args"]["snr_db"] == ["inf"]


def test_one_track_per_run() -> None:
    d = FIXTURES / "many_runs"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        analysis = Analysis.from_files(d / "etdump.etdp", d / "etrecord.bin")
    runs = {b.name: b.runs for b in analysis.profile.blocks}
    events = validate(trace_events(analysis))
    names = [e["args"]["name"] for e in events if e["name"] == "thread_name"]
    assert sorted(n for n in names if not n.endswith("(unnested)")) == sorted(
        f"{block} run {r}" for block, n in runs.items() for r in range(n))
    assert sum(runs.values()) > 2
    per_run = defaultdict(int)
    tid_name = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    for e in events:
        if e["ph"] == "X":
            per_run[tid_name[e["tid"]].replace(" (unnested)", "")] += 1
    execute = [b for b in analysis.profile.blocks if b.runs > 1][0]
    assert {per_run[f"{execute.name} run {r}"] for r in range(execute.runs)} == {len(execute.events)}


def test_straddling_slices_move_to_their_own_track(example_analysis: Analysis) -> None:
    block = example_analysis.profile.blocks[1]
    call = next(e for e in block.events if e.name == "DELEGATE_CALL")
    # starts inside the first delegate call and ends after it: it cannot nest there
    bad = call.model_copy(update={"name": "straddler", "start_us": [call.start_us[0] + call.durations[0] * 500],
                                  "durations": call.durations})
    blocks = [example_analysis.profile.blocks[0], block.model_copy(update={"events": [*block.events, bad]})]
    analysis = example_analysis.model_copy(update={"profile": example_analysis.profile.model_copy(update={"blocks": blocks})})
    events = validate(trace_events(analysis))
    tid_name = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    moved = [(e["name"], tid_name[e["tid"]]) for e in events if e["ph"] == "X" and tid_name[e["tid"]].endswith("(unnested)")]
    assert moved == [("straddler", "Execute run 0 (unnested)")]


def test_cli_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "trace.json"
    assert main(["trace", str(DATA / "analysis_v1.json"), "-o", str(out)]) == 0
    validate(json.loads(out.read_text()))
    assert "slices" in capsys.readouterr().err
