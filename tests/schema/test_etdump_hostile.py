"""Hostile ETDumps: every malformed table, offset, vector, string or enum is a named ``ETDumpError``.

Dumps are crafted with ``etdump_writer`` and then patched at the byte the test is about, located
with the reader's own table access; real fixtures are mutated byte by byte; the half-precision
dump written by ExecuTorch 1.5.1's runtime (``tests/fixtures/fp16_debug``) is read for real.
"""

from __future__ import annotations

import io
import json
import random
import struct
import warnings
from pathlib import Path

import pytest

from numdiff.errors import ETDumpError, NumdiffError
from numdiff.inspector import Inspector
from numdiff.schema.etdump._flatbuf import Buffer, Table
from numdiff.schema.etdump import (
    DebugEvent,
    ETDumpDoc,
    Event,
    ProfileEvent,
    RunDoc,
    ScalarType,
    Tensor,
    Value,
    ValueType,
    read_etdump,
)
from numdiff.schema.etdump.writer import write_etdump

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FP16 = FIXTURES / "fp16_debug"


def _profile(name: str = "op", instruction: int = 0) -> Event:
    return Event(profile_event=ProfileEvent(name, 0, instruction, -1, None, None, 10, 20))


def _debug(tensor: Tensor, instruction: int = 0) -> Event:
    value = Value(ValueType.TENSOR, tensor=tensor, output=False)
    return Event(debug_event=DebugEvent(0, instruction, value, -1, None, "op"))


def _dump(*runs: RunDoc) -> bytearray:
    return bytearray(write_etdump(ETDumpDoc(run_data=list(runs))))


def _root(data: bytes | bytearray) -> Table:
    buf = Buffer.of(bytes(data), None)
    return buf.table(4 + struct.unpack_from("<I", data, 4)[0], "root")


def _field_pos(t: Table, index: int) -> int:
    """Absolute byte position of field ``index`` of table ``t``."""
    off = int(struct.unpack_from("<H", t.buf.data, t.vtable + 4 + 2 * index)[0])
    assert off, "field absent"
    return t.pos + off


def _runs(data: bytes | bytearray) -> tuple[int, int]:
    """(position of the run_data vector's first element, its length)."""
    found = _root(data).vector(1, 4, "runs")
    assert found is not None
    return found


def _first_run(data: bytes | bytearray) -> Table:
    start, _ = _runs(data)
    return Buffer.of(bytes(data), None).table(start + struct.unpack_from("<I", data, start)[0], "run")


def _read(data: bytes | bytearray) -> None:
    read_etdump(bytes(data), path="hostile.etdp")


# --- tables and vtables ------------------------------------------------------------------------


def test_root_soffset_pointing_outside_the_file() -> None:
    data = _dump(RunDoc("Execute", [_profile()]))
    root = _root(data)
    struct.pack_into("<i", data, root.pos, -(2**30))
    with pytest.raises(ETDumpError, match=r"hostile\.etdp.*vtable of ETDump root \(4 bytes\) lies outside the \d+-byte file"):
        _read(data)


@pytest.mark.parametrize(("vt_size", "message"), [(3, "invalid size 3"), (0, "invalid size 0"), (7, "invalid size 7")])
def test_vtable_with_an_invalid_size(vt_size: int, message: str) -> None:
    data = _dump(RunDoc("Execute", [_profile()]))
    struct.pack_into("<H", data, _root(data).vtable, vt_size)
    with pytest.raises(ETDumpError, match=rf"vtable of ETDump root has an {message}"):
        _read(data)


def test_table_size_smaller_than_its_soffset() -> None:
    data = _dump(RunDoc("Execute", [_profile()]))
    struct.pack_into("<H", data, _root(data).vtable + 2, 2)
    with pytest.raises(ETDumpError, match="vtable of ETDump root gives the table an invalid size 2"):
        _read(data)


def test_field_outside_its_table() -> None:
    data = _dump(RunDoc("Execute", [_profile()]))
    run = _first_run(data)
    struct.pack_into("<H", data, run.vtable + 4 + 2 * 1, 200)  # bundled_input_index far past the table
    with pytest.raises(ETDumpError, match=r"field 1 \(bundled_input_index\) of RunData at table offset 200 does not fit in the \d+-byte table"):
        _read(data)


def test_event_field_outside_its_table_in_the_column_reader() -> None:
    data = _dump(RunDoc("Execute", [_profile(), _profile("b", 1)]))
    run = _first_run(data)
    events = run.table_positions(3, "events")
    event = run.buf.table(int(events[0]), "Event")
    struct.pack_into("<H", data, event.vtable + 4, 0xFFF0)
    with pytest.raises(ETDumpError, match=r"field 0 \(profile_event\) of one Event table at table offset 65520 does not fit"):
        _read(data)


def test_event_vtable_with_an_invalid_size_in_the_column_reader() -> None:
    data = _dump(RunDoc("Execute", [_profile(), _profile("b", 1)]))
    run = _first_run(data)
    event = run.buf.table(int(run.table_positions(3, "events")[1]), "Event")
    struct.pack_into("<H", data, event.vtable, 5)
    with pytest.raises(ETDumpError, match="a vtable of Event has an invalid size 5"):
        _read(data)


# --- offsets and vectors -------------------------------------------------------------------------


def test_null_offset_field() -> None:
    data = _dump(RunDoc("Execute", [_profile()]))
    run = _first_run(data)
    struct.pack_into("<I", data, _field_pos(run, 0), 0)  # the run's name
    with pytest.raises(ETDumpError, match=r"field 0 \(name\) of RunData is a null reference \(offset 0\)"):
        _read(data)


def test_vector_longer_than_the_file() -> None:
    data = _dump(RunDoc("Execute", [_profile()]))
    start, _ = _runs(data)
    struct.pack_into("<I", data, start - 4, 0xFFFF_FFFF)
    with pytest.raises(ETDumpError, match=r"ETDump\.run_data of 4294967295 elements \(17179869180 bytes\) lies outside"):
        _read(data)


def test_events_vector_longer_than_the_file() -> None:
    data = _dump(RunDoc("Execute", [_profile()]))
    run = _first_run(data)
    target = _field_pos(run, 3) + struct.unpack_from("<I", data, _field_pos(run, 3))[0]
    struct.pack_into("<I", data, target, 10**6)
    with pytest.raises(ETDumpError, match=r"RunData\.events of 1000000 elements"):
        _read(data)


def test_string_longer_than_the_file() -> None:
    data = _dump(RunDoc("Execute", [_profile()]))
    run = _first_run(data)
    target = _field_pos(run, 0) + struct.unpack_from("<I", data, _field_pos(run, 0))[0]
    struct.pack_into("<I", data, target, 2**31)
    with pytest.raises(ETDumpError, match=r"string field 0 \(name\) of RunData \(2147483648 bytes\) lies outside"):
        _read(data)


def test_string_that_is_not_utf8() -> None:
    data = _dump(RunDoc("Execute", [_profile("abcdef")]))
    at = bytes(data).index(b"abcdef")
    data[at : at + 2] = b"\xff\xfe"
    with pytest.raises(ETDumpError, match=r"an event name is not valid UTF-8: b'\\xff\\xfecdef'"):
        _read(data)


def test_run_name_that_is_not_utf8() -> None:
    data = _dump(RunDoc("Exec_run", [_profile()]))
    at = bytes(data).index(b"Exec_run")
    data[at] = 0xC3  # a lead byte without its continuation
    with pytest.raises(ETDumpError, match=r"string field 0 \(name\) of RunData is not valid UTF-8"):
        _read(data)


def test_a_run_table_listed_many_times_is_read_once() -> None:
    data = _dump(*[RunDoc(f"run{i}", [_profile()]) for i in range(50)])
    start, n = _runs(data)
    first = start + struct.unpack_from("<I", data, start)[0]
    for i in range(1, n):  # every element now points at the first run's table
        struct.pack_into("<I", data, start + 4 * i, first - (start + 4 * i))
    dump = read_etdump(bytes(data))
    assert [r.name for r in dump.run_data] == ["run0"] * 50
    assert all(r.columns.kind is dump.run_data[0].columns.kind for r in dump.run_data)


# --- enums and typed values ------------------------------------------------------------------------


def _value_table(data: bytearray) -> Table:
    dump = read_etdump(bytes(data))
    cols = dump.run_data[0].columns
    return dump.buffer.table(int(cols.value[cols.value >= 0][0]), "Value")


def test_unknown_value_type_tag() -> None:
    data = _dump(RunDoc("Execute", [_profile(), _debug(Tensor(int(ScalarType.FLOAT), (1,), (1,), 0))]))
    struct.pack_into("<B", data, _field_pos(_value_table(data), 0), 200)
    with pytest.raises(ETDumpError, match=r"Value has unknown type tag 200"):
        Inspector(etdump_data=bytes(data))


def test_unknown_tensor_scalar_type() -> None:
    data = _dump(RunDoc("Execute", [_profile(), _debug(Tensor(int(ScalarType.FLOAT), (1,), (1,), 0))]))
    tensor = _value_table(data).subtable(1, "Tensor")
    assert tensor is not None
    struct.pack_into("<b", data, _field_pos(tensor, 0), 99)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ETDumpError, match=r"Tensor\.scalar_type is 99, not a known scalar type\n.*6 \(FLOAT\)"):
            Inspector(etdump_data=bytes(data))


# --- the 1.5.1 runtime's half-precision dumps ------------------------------------------------------


@pytest.mark.parametrize("name", ["etdump.etdp", "bf16_etdump.etdp"])
def test_real_half_precision_dump_names_the_runtime_limitation(name: str) -> None:
    expected = json.loads((FP16 / "reference.json").read_text())
    assert expected["reference_with_debug_buffer"]["error_type"] == "CalledProcessError"  # the reference fails too
    with pytest.raises(ETDumpError, match=r"ETDump\.run_data ends with 2 null reference.*ScalarType = 5 is not yet "
                                          r"supported in ETDump(.|\n)*log float32 copies(.|\n)*no debug buffer") as info:
        Inspector(etdump_path=FP16 / name, debug_buffer_path=FP16 / "debug_buffer.bin")
    assert "re-copy" not in str(info.value)


def test_runtime_messages_recorded_with_the_fixture() -> None:
    lines = set((FP16 / "runtime_stderr.txt").read_text().split("\n"))
    assert any("This ScalarType = 5 is not yet supported in ETDump" in line for line in lines)
    assert any("This ScalarType = 15 is not yet supported in ETDump" in line for line in lines)


def test_real_half_precision_model_profiled_without_debug_buffer_loads() -> None:
    assert json.loads((FP16 / "reference.json").read_text())["reference_profile_only"]["error_type"] is None
    inspector = Inspector(etdump_path=FP16 / "profile_only.etdp")
    names = [e.name for b in inspector.event_blocks for e in b.events]
    assert "native_call_addmm.out" in names and "Method::execute" in names


def test_signature_needs_the_declared_size() -> None:
    """Padding the real dump breaks the 'exactly its declared size' condition: generic message."""
    with pytest.raises(ETDumpError, match=r"null reference \(offset 0\) at element 4\n.*truncated or corrupt"):
        read_etdump((FP16 / "etdump.etdp").read_bytes() + b"\0" * 8)


def test_signature_needs_trailing_nulls() -> None:
    data = _dump(RunDoc("a", [_profile()]), RunDoc("b", [_profile()]), RunDoc("c", [_profile()]))
    start, n = _runs(data)
    assert n == 3
    struct.pack_into("<I", data, start + 4, 0)  # the middle run
    with pytest.raises(ETDumpError, match=r"null reference \(offset 0\) at element 1\n.*exactly the size it declares"):
        _read(data)
    struct.pack_into("<I", data, start + 4, 8)
    struct.pack_into("<I", data, start + 8, 0)  # now the last one: the runtime's signature
    with pytest.raises(ETDumpError, match=r"ends with 1 null reference.*not yet supported"):
        _read(data)


# --- dumps with nothing in them -------------------------------------------------------------------


def test_dump_with_no_runs_gives_an_empty_table() -> None:
    inspector = Inspector(etdump_data=write_etdump(ETDumpDoc(run_data=[])))
    df = inspector.to_dataframe()
    assert len(df) == 0 and list(df.columns[:3]) == ["event_block_name", "event_name", "raw"]
    assert "avg (ms)" in df.columns
    out = io.StringIO()
    inspector.print_data_tabular(file=out)
    assert "event_name" in out.getvalue() and "raw" not in out.getvalue()
    tsv = io.StringIO()
    inspector.save_data_to_tsv(tsv)
    assert tsv.getvalue().startswith("\tevent_block_name\tevent_name")


def test_dump_with_only_empty_runs_gives_an_empty_table() -> None:
    """The reference raises pandas' "No objects to concatenate" here; an empty table is what a user expects."""
    inspector = Inspector(etdump_data=write_etdump(ETDumpDoc(run_data=[RunDoc("Execute", [])])),
                          target_time_scale="us")
    assert [(b.name, b.events) for b in inspector.event_blocks] == [("Execute", [])]  # as the reference
    df = inspector.to_dataframe()
    assert len(df) == 0 and "avg (us)" in df.columns


def test_run_without_an_events_vector_gives_no_block() -> None:
    data = write_etdump(ETDumpDoc(run_data=[RunDoc("Execute", None), RunDoc("Other", [_profile()])]))
    inspector = Inspector(etdump_data=data)
    assert [b.name for b in inspector.event_blocks] == ["Other"]  # the reference skips runs without events
    dump = read_etdump(data)
    assert [r.has_events_vector for r in dump.run_data] == [False, True]
    assert write_etdump(dump.to_doc()) == data  # the absent vector round-trips


# --- byte-level mutations of the real fixtures --------------------------------------------------------


def _mutants(seed: int, count: int) -> list[tuple[str, bytes]]:
    rng = random.Random(seed)
    sources = sorted(p for p in FIXTURES.glob("*/etdump.etdp"))
    out = []
    for _ in range(count):
        src = rng.choice(sources)
        data = bytearray(src.read_bytes())
        for _ in range(rng.choice([1, 2, 4])):
            p = rng.randrange(len(data) - 8)
            kind = rng.randrange(4)
            if kind == 0:
                data[p] ^= 1 << rng.randrange(8)
            elif kind == 1:
                data[p : p + 4] = rng.choice([0, 0xFFFF_FFFF, 0x7FFF_FFFF, 0x8000_0000, len(data)]).to_bytes(4, "little")
            elif kind == 2:
                data[p : p + 8] = rng.choice([0, 2**63 - 1, 2**64 - 1, 1 << 40]).to_bytes(8, "little")
            else:
                data[p] = rng.randrange(256)
        out.append((src.parent.name, bytes(data)))
    return out


@pytest.mark.parametrize("seed", range(4))
def test_mutated_real_dumps_fail_only_with_numdiff_errors(seed: int) -> None:
    for folder, data in _mutants(seed, 60):
        buffer = FIXTURES / folder / "debug_buffer.bin"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                inspector = Inspector(etdump_data=data, debug_buffer_path=buffer if buffer.exists() else None)
                inspector.print_data_tabular(file=io.StringIO())
                for block in inspector.event_blocks:
                    for event in block.events:
                        _ = event.debug_data
        except NumdiffError as e:
            assert str(e).strip(), "an error must say what is wrong"


# --- copying bounded by the file's size -----------------------------------------------------------


def test_a_name_shared_by_many_events_is_copied_once() -> None:
    name = "n" * 50_000
    dump = read_etdump(write_etdump(ETDumpDoc(run_data=[RunDoc("Execute", [_profile(name, i) for i in range(500)])])))
    assert dump.strings.count(name) == 1
    assert {dump.string(int(i)) for i in dump.run_data[0].columns.name} == {name}


def test_overlapping_strings_cannot_make_the_reader_copy_more_than_the_file() -> None:
    pad = "\x00\x20\x00\x00" * 16_384  # every 4-byte word reads as the length 8192
    events = [_profile(pad)] + [_profile(f"e{i}", i) for i in range(1, 1500)]
    data = _dump(RunDoc("Execute", events))
    region = bytes(data).index(pad.encode())
    run = _first_run(data)
    for i, pos in enumerate(run.table_positions(3, "events").tolist()):
        prof = run.buf.table(int(pos), "Event").subtable(0, "ProfileEvent")
        assert prof is not None
        at = _field_pos(prof, 0)
        struct.pack_into("<I", data, at, region + 4 * i - at)  # event i's name: a string starting inside the pad
    with pytest.raises(ETDumpError, match=r"strings and byte vectors overlap, together claiming \d+ bytes of a \d+-byte file"):
        _read(data)


def test_signature_is_only_claimed_for_run_data() -> None:
    data = _dump(RunDoc("Execute", [_profile("a", 0), _profile("b", 1)]))
    run = _first_run(data)
    target = _field_pos(run, 3) + struct.unpack_from("<I", data, _field_pos(run, 3))[0]
    struct.pack_into("<I", data, target + 8, 0)  # the last event: trailing, but not in run_data
    with pytest.raises(ETDumpError, match=r"RunData\.events holds a null reference \(offset 0\) at element 1\n") as info:
        _read(data)
    assert "not yet supported" not in str(info.value)


def test_a_null_event_of_a_later_run_is_named_by_its_index_in_that_run() -> None:
    """All runs' events vectors are followed at once; the error still names the element in its run."""
    data = _dump(RunDoc("Execute", [_profile("a", 0), _profile("b", 1)]),
                 RunDoc("Execute", [_profile("a", 0), _profile("b", 1), _profile("c", 2)]))
    root = _root(data)
    second = root.buf.table(int(root.table_positions(1, "run_data")[1]), "RunData")
    target = _field_pos(second, 3) + struct.unpack_from("<I", data, _field_pos(second, 3))[0]
    struct.pack_into("<I", data, target + 4 + 4 * 2, 0)  # the second run's third event
    with pytest.raises(ETDumpError, match=r"RunData\.events holds a null reference \(offset 0\) at element 2\n") as info:
        _read(data)
    assert info.value.offset == target + 4 + 4 * 2


def test_value_tagged_tensor_without_one_names_the_file(tmp_path: Path) -> None:
    data = _dump(RunDoc("Execute", [_profile(), Event(debug_event=DebugEvent(0, 0, Value(ValueType.TENSOR), -1, None, "op"))]))
    path = tmp_path / "tagged.etdp"
    path.write_bytes(bytes(data))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ETDumpError, match=r"tagged\.etdp.*event 'op' of run 'Execute': Value says Tensor but carries none"):
            Inspector(etdump_path=path)


def test_names_that_would_fill_memory_when_repeated_per_row_are_refused() -> None:
    # fourth 100k campaign: a 1 MB run name over 155 events took 1.3 GiB in to_dataframe (each
    # row's copy of the block name); names repeated row by row are bounded by the file's size
    from numdiff.schema.etdump._reader import NAME_FLOOR, NAME_RATIO, read_etdump

    long_name = "A" * (1 << 20)
    events = [_profile(f"op{i}", i) for i in range(64)]
    crafted = bytes(_dump(RunDoc(long_name, events)))
    assert len(long_name) * 64 > NAME_RATIO * len(crafted) + NAME_FLOOR
    with pytest.raises(ETDumpError, match=r"names come to \d+ bytes when repeated in each event's row, more than "
                                          r"numdiff builds tables from \(16x the \d+-byte file, plus 32 MiB\)\n"
                                          r"Names in a dump the runtime writes are short"):
        read_etdump(crafted)
    fine = bytes(_dump(RunDoc(long_name, events[:8])))  # 8 MiB of repeated names: well inside the floor
    assert read_etdump(fine).run_data[0].name == long_name


def test_repeated_names_are_counted_alike_for_all_runs_at_once_and_run_by_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """The names' total is the same whether the runs are counted together (each run once) or one by
    one (a run listed twice): the limit refuses a dump one byte over it, either way."""
    import dataclasses

    import numpy as np

    from numdiff.schema.etdump import EventColumns
    from numdiff.schema.etdump import _reader

    events = [_profile(f"native_call_op{i % 5}.out", i) for i in range(300)]
    dump = _reader.read_etdump(bytes(_dump(RunDoc("Execute", events), RunDoc("Method::init", events[:7]))))
    total = sum(len(e.profile_event.name) + len(r.name or "")  # type: ignore[union-attr]
                for r in dump.run_data for e in r.events)
    strings = {s.encode(): i for i, s in enumerate(dump.strings)}
    together = EventColumns(*(np.concatenate([getattr(r.columns, f.name) for r in dump.run_data])
                              for f in dataclasses.fields(EventColumns)))
    for every_run in (together, None):
        monkeypatch.setattr(_reader, "NAME_FLOOR", total - _reader.NAME_RATIO * len(dump.buffer))
        _reader._check_repeated_names(dump.buffer, dump, strings, every_run)  # exactly at the limit
        monkeypatch.setattr(_reader, "NAME_FLOOR", total - 1 - _reader.NAME_RATIO * len(dump.buffer))
        with pytest.raises(ETDumpError, match=rf"names come to {total} bytes"):
            _reader._check_repeated_names(dump.buffer, dump, strings, every_run)


def test_real_dumps_repeat_names_far_below_the_limit() -> None:
    # the limit above is 16x the file: every dump the runtime wrote for the fixtures stays under 0.5x
    # (fp16_debug's dumps are unreadable by design: the 1.5.1 runtime cannot log half precision)
    from numdiff.schema.etdump._reader import read_etdump

    paths = sorted(p for p in FIXTURES.rglob("*.etdp") if p.parent != FP16)
    assert len(paths) > 30
    for path in paths:
        dump = read_etdump(path)
        total = sum(sum(len(dump.strings[i].encode()) for i in ids[ids >= 0].tolist())
                    for run in dump.run_data for ids in (run.columns.name, run.columns.delegate_str)) \
            + sum(len(run.name or "") * len(run.columns.kind) for run in dump.run_data)
        assert total < 0.5 * path.stat().st_size, path
