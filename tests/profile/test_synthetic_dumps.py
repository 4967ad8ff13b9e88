"""Profiling semantics on dumps built with numdiff's own writer (no patching, no oracle needed)."""

from __future__ import annotations

import warnings

import pytest

from numdiff import Inspector
from numdiff.errors import ETDumpError
from numdiff.schema.etdump import AllocationEvent, DebugEvent, ETDumpDoc, Event, ProfileEvent, RunDoc, Tensor, Value, ValueType
from numdiff.schema.etdump.writer import write_etdump


def _op(name: str, iid: int, start: int, end: int, *, dint: int = -1, dstr: str | None = None,
        meta: bytes | None = None) -> Event:
    return Event(profile_event=ProfileEvent(name, 0, iid, dint, dstr, meta, start, end))


def _inspect(runs: list[RunDoc], **kw: object) -> Inspector:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Inspector(etdump_data=write_etdump(ETDumpDoc(0, runs)), **kw)  # type: ignore[arg-type]


def test_runs_with_the_same_events_merge_into_one_block_with_samples_per_run() -> None:
    runs = [RunDoc("Execute", [_op("add", 0, 0, 1_000_000 * (i + 1)), _op("Method::execute", -1, 0, 5_000_000)])
            for i in range(4)]
    (block,) = _inspect(runs).event_blocks
    add = block.events[0]
    assert add.perf_data is not None and add.perf_data.raw == [1.0, 2.0, 3.0, 4.0]
    assert add.perf_data.p50 == 2.5 and add.perf_data.min == 1.0 and add.perf_data.max == 4.0
    assert add.start_time == [0, 0, 0, 0]


def test_runs_with_different_events_make_separate_blocks() -> None:
    runs = [RunDoc("Execute", [_op("add", 0, 0, 10)]), RunDoc("Execute", [_op("mul", 0, 0, 10)])]
    assert [len(b.events) for b in _inspect(runs).event_blocks] == [1, 1]


def test_32_bit_timer_wrap_around() -> None:
    (block,) = _inspect([RunDoc("Execute", [_op("add", 0, 2**32 - 11, 9)])],
                        source_time_scale="cycles", target_time_scale="cycles").event_blocks
    assert block.events[0].perf_data is not None and block.events[0].perf_data.raw == [19.0]


def test_impossible_wrap_around_is_an_etdump_error() -> None:
    with pytest.raises(ETDumpError, match="start time after its end time"):
        _inspect([RunDoc("Execute", [_op("add", 0, 2**40, 5)])])


def test_delegated_events_use_the_converter_and_parser() -> None:
    events = [_op("ignored", 1, 100, 400, dstr="Conv #1", meta=b"a=1"), _op("DELEGATE_CALL", 1, 0, 1_000_000)]
    seen: list[tuple[object, object]] = []

    def converter(name: object, t: object) -> float:
        seen.append((name, t))
        return float(t) / 100  # type: ignore[arg-type]

    def parser(metadata: list[bytes]) -> dict[str, list[str]]:
        return {"parsed": [m.decode() for m in metadata]}  # type: ignore[attr-defined]

    insp = _inspect([RunDoc("Execute", events)], delegate_time_scale_converter=converter,
                    delegate_metadata_parser=parser)
    conv, call = insp.event_blocks[0].events
    assert conv.name == "Conv #1" and conv.is_delegated_op and conv.delegate_debug_identifier == "Conv #1"
    assert conv.perf_data is not None and conv.perf_data.raw == [3.0]
    assert ("Conv #1", 100) in seen
    assert conv.raw_delegate_debug_metadatas == [b"a=1"]
    assert conv.delegate_debug_metadatas == {"parsed": ["a=1"]}
    assert call.perf_data is not None and call.perf_data.raw == [1.0]  # non-delegated: scale factor
    df = insp.to_dataframe(include_delegate_debug_data=True)
    assert "parsed" in df.columns


def test_integer_delegate_ids_name_the_event() -> None:
    (block,) = _inspect([RunDoc("Execute", [_op("x", 2, 0, 10, dint=0)])]).event_blocks
    assert block.events[0].name == "0" and block.events[0].delegate_debug_identifier == 0


def test_allocation_events_do_not_become_profiling_rows() -> None:
    events = [_op("add", 0, 0, 10), Event(allocation_event=AllocationEvent(0, 64))]
    (block,) = _inspect([RunDoc("Execute", events)]).event_blocks
    assert [e.name for e in block.events] == ["add"]


def test_program_outputs_are_run_outputs_not_events(tmp_path: object) -> None:
    out = Value(ValueType.INT, int_value=7, output=True)
    events = [_op("add", 0, 0, 10), Event(debug_event=DebugEvent(0, 0, out, -1, None, None))]
    (block,) = _inspect([RunDoc("Execute", events)]).event_blocks
    assert block.run_output == [7]
    assert block.events[0].debug_data == []


def test_tensor_without_buffer_warns_and_is_a_placeholder() -> None:
    t = Value(ValueType.TENSOR, tensor=Tensor(6, (2,), (1,), 0), output=False)
    events = [_op("add", 0, 0, 10), Event(debug_event=DebugEvent(0, 0, t, -1, None, "add"))]
    with pytest.warns(UserWarning, match="no debug buffer was given"):
        insp = Inspector(etdump_data=write_etdump(ETDumpDoc(0, [RunDoc("Execute", events)])))
    assert "MissingTensor" in repr(insp.event_blocks[0].events[0].debug_data[0])


def test_repeated_signature_in_one_run_keeps_the_last_sample() -> None:
    """The reference keys events by signature: a repeat inside one run replaces the first."""
    (block,) = _inspect([RunDoc("Execute", [_op("add", 0, 0, 1_000_000), _op("add", 0, 0, 3_000_000)])]).event_blocks
    assert len(block.events) == 1
    assert block.events[0].perf_data is not None and block.events[0].perf_data.raw == [3.0]
