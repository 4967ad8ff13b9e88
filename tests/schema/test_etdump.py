"""ETDump reader and writer: round trips, the whole schema, and every kind of bad file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numdiff.errors import ETDumpError
from numdiff.schema import etdump as E
from numdiff.schema.etdump.writer import write_etdump

SCHEMA = Path(E.__file__).with_name("etdump.fbs")

tensors = st.builds(
    E.Tensor,
    scalar_type=st.sampled_from([int(t) for t in E.ScalarType]),
    sizes=st.lists(st.integers(0, 6), max_size=4).map(tuple),
    strides=st.lists(st.integers(0, 64), max_size=4).map(tuple),
    offset=st.integers(0, 2**40),
)
values = st.one_of(
    st.builds(E.Value, val=st.just(E.ValueType.NULL)),
    st.builds(E.Value, val=st.just(E.ValueType.INT), int_value=st.integers(-(2**63), 2**63 - 1)),
    st.builds(E.Value, val=st.just(E.ValueType.BOOL), bool_value=st.booleans()),
    st.builds(E.Value, val=st.just(E.ValueType.DOUBLE), double_value=st.floats(allow_nan=False)),
    st.builds(E.Value, val=st.just(E.ValueType.FLOAT), float_value=st.floats(width=32, allow_nan=False)),
    st.builds(E.Value, val=st.just(E.ValueType.STRING), string_value=st.text(max_size=8)),
    st.builds(E.Value, val=st.just(E.ValueType.TENSOR), tensor=tensors, output=st.none() | st.booleans()),
    st.builds(E.Value, val=st.just(E.ValueType.TENSOR_LIST), tensor_list=st.lists(tensors, max_size=3).map(tuple),
              output=st.none() | st.booleans()),
)
names = st.none() | st.text(max_size=12)
ids = st.integers(-1, 2**31 - 1)
profile = st.builds(E.ProfileEvent, name=names, chain_index=st.integers(0, 3), instruction_id=ids,
                    delegate_debug_id_int=ids, delegate_debug_id_str=names,
                    delegate_debug_metadata=st.none() | st.binary(min_size=1, max_size=8),
                    start_time=st.integers(0, 2**64 - 1), end_time=st.integers(0, 2**64 - 1))
debug = st.builds(E.DebugEvent, chain_index=st.integers(0, 2**64 - 1), instruction_id=ids,
                  debug_entry=st.none() | values, delegate_debug_id_int=ids, delegate_debug_id_str=names, name=names)
alloc = st.builds(E.AllocationEvent, allocator_id=st.integers(-(2**31), 2**31 - 1), allocation_size=st.integers(0, 2**64 - 1))
events = st.one_of(st.builds(E.Event, profile_event=profile), st.builds(E.Event, debug_event=debug),
                   st.builds(E.Event, allocation_event=alloc))
runs = st.builds(E.RunDoc, name=names, events=st.lists(events, max_size=6),
                 bundled_input_index=st.integers(-1, 100), allocators=st.lists(st.builds(E.Allocator, name=names), max_size=2))
docs = st.builds(E.ETDumpDoc, version=st.integers(0, 2**32 - 1), run_data=st.lists(runs, max_size=3))


def _as_lists(doc: E.ETDumpDoc) -> list[tuple[object, ...]]:
    return [(r.name, r.bundled_input_index, list(r.allocators), list(r.events)) for r in doc.run_data]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=docs, prefixed=st.booleans())
def test_write_then_read_gives_back_every_field(doc: E.ETDumpDoc, prefixed: bool) -> None:
    dump = E.read_etdump(write_etdump(doc, size_prefixed=prefixed))
    assert dump.version == doc.version
    assert _as_lists(dump.to_doc()) == _as_lists(doc)


#: Runs long enough for the reader's numpy paths: a field of many tables per distinct vtable, names
#: interned as hashed word columns (from 64 strings), a few layouts or one, repeated names.
repeated_names = st.sampled_from(["native_call_add.out", "native_call_mul.out", "OPERATOR_CALL", "DELEGATE_CALL",
                                  "x" * 63, "y" * 64, "z" * 65 + "é", ""]) | st.none()
long_profile = st.builds(E.ProfileEvent, name=repeated_names, chain_index=st.integers(0, 3), instruction_id=ids,
                         delegate_debug_id_int=ids, delegate_debug_id_str=repeated_names,
                         delegate_debug_metadata=st.none(), start_time=st.integers(0, 2**64 - 1),
                         end_time=st.integers(0, 2**64 - 1))
long_events = st.one_of(st.builds(E.Event, profile_event=long_profile), st.builds(E.Event, debug_event=debug),
                        st.builds(E.Event, allocation_event=alloc))
long_runs = st.builds(E.RunDoc, name=names, events=st.lists(long_events, min_size=40, max_size=160),
                      bundled_input_index=st.integers(-1, 100))
long_docs = st.builds(E.ETDumpDoc, version=st.integers(0, 2**32 - 1), run_data=st.lists(long_runs, min_size=1, max_size=3))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(doc=long_docs)
def test_long_runs_read_back_every_field(doc: E.ETDumpDoc) -> None:
    dump = E.read_etdump(write_etdump(doc))
    assert _as_lists(dump.to_doc()) == _as_lists(doc)


@settings(max_examples=80, deadline=None)
@given(doc=docs, data=st.data())
def test_corrupt_bytes_raise_etdump_error_or_parse(doc: E.ETDumpDoc, data: st.DataObject) -> None:
    """Random damage never escapes as anything but ETDumpError (no IndexError, no hang)."""
    raw = bytearray(write_etdump(doc))
    for _ in range(data.draw(st.integers(1, 8))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    try:
        dump = E.read_etdump(bytes(raw))
        for run in dump.run_data:
            run.events  # materialising every record must be safe too
    except ETDumpError:
        pass


def _schema_fields() -> dict[str, list[str]]:
    tables: dict[str, list[str]] = {}
    for m in re.finditer(r"table (\w+)\s*\{([^}]*)\}", SCHEMA.read_text()):
        body = re.sub(r"//[^\n]*", "", m.group(2))
        tables[m.group(1)] = re.findall(r"(\w+)\s*:", body)
    return tables


def test_records_cover_every_schema_field() -> None:
    """Each table of etdump.fbs has a record with exactly its fields (wrapper tables inlined)."""
    schema = _schema_fields()
    records = {"Tensor": E.Tensor, "ProfileEvent": E.ProfileEvent, "DebugEvent": E.DebugEvent,
               "AllocationEvent": E.AllocationEvent, "Event": E.Event, "Allocator": E.Allocator}
    for table, record in records.items():
        assert list(record.__dataclass_fields__) == schema[table], table
    assert list(E.Value.__dataclass_fields__) == schema["Value"]
    assert schema["RunData"] == ["name", "bundled_input_index", "allocators", "events"]
    assert list(E.RunDoc.__dataclass_fields__) == ["name", "events", "bundled_input_index", "allocators"]
    assert schema["ETDump"] == list(E.ETDumpDoc.__dataclass_fields__)
    wrappers = {"Int", "Bool", "Float", "Double", "String", "TensorList", "Null", "RunData", "ETDump", "Value"}
    assert set(schema) == set(records) | wrappers
    assert {t.name.lower().replace("_", "") for t in E.ValueType} == {
        "null", "int", "bool", "float", "double", "tensor", "tensorlist", "string"}


def _one_run() -> bytes:
    pe = E.ProfileEvent("op", 0, 1, -1, None, None, 5, 9)
    return write_etdump(E.ETDumpDoc(0, [E.RunDoc("Execute", [E.Event(profile_event=pe)])]))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "is empty"),
        (b"\x01\x02\x03", "too short"),
        (b"\x00" * 64, "not an ETDump: file identifier"),
        (b"PK\x03\x04" + b"\x00" * 60, "not an ETDump"),
    ],
)
def test_bad_headers_are_named(data: bytes, message: str) -> None:
    with pytest.raises(ETDumpError, match=message):
        E.read_etdump(data, path="dump.etdp")


def test_truncated_file_names_the_file_and_the_sizes(tmp_path: Path) -> None:
    raw = _one_run()
    path = tmp_path / "cut.etdp"
    path.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ETDumpError, match=r"cut\.etdp.*truncated: the size prefix says \d+ bytes"):
        E.read_etdump(path)


def test_offset_past_the_end_is_reported_with_its_position() -> None:
    raw = bytearray(write_etdump(E.ETDumpDoc(0, [E.RunDoc("Execute", [])]), size_prefixed=False))
    raw[0:4] = (len(raw) + 100).to_bytes(4, "little")  # root offset beyond the file
    with pytest.raises(ETDumpError, match=r"at byte \d+: .*outside the \d+-byte file"):
        E.read_etdump(bytes(raw))


def test_missing_file_is_an_etdump_error(tmp_path: Path) -> None:
    with pytest.raises(ETDumpError, match="nope.etdp.*cannot be read"):
        E.read_etdump(tmp_path / "nope.etdp")


def test_unprefixed_and_prefixed_forms_read_the_same() -> None:
    doc = E.ETDumpDoc(3, [E.RunDoc("Execute", [E.Event(profile_event=E.ProfileEvent("a", 0, 2, -1, None, None, 1, 4))])])
    a, b = E.read_etdump(write_etdump(doc)), E.read_etdump(write_etdump(doc, size_prefixed=False))
    assert a.to_doc() == b.to_doc()


def test_input_bytes_are_not_modified() -> None:
    raw = _one_run()
    copy = bytes(raw)
    E.read_etdump(raw)
    assert raw == copy


def test_a_file_is_mapped_read_only_and_read_when_it_cannot_be_mapped(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import mmap

    import numdiff.schema.etdump._reader as reader

    doc = E.ETDumpDoc(0, [E.RunDoc("Execute", [E.Event(profile_event=E.ProfileEvent("op", 0, 1, -1, None, None, 5, 9))])])
    path = tmp_path / "run.etdp"
    path.write_bytes(write_etdump(doc))
    before = path.read_bytes()
    mapped = E.read_etdump(path)
    assert isinstance(mapped.buffer.data, mmap.mmap)
    with pytest.raises(TypeError):  # read-only: nothing can write through the mapping
        mapped.buffer.data[0] = 0  # type: ignore[index]
    assert path.read_bytes() == before

    def refuse(*args: object, **kwargs: object) -> mmap.mmap:
        raise OSError("this file system cannot map files")

    monkeypatch.setattr(reader.mmap, "mmap", refuse)
    read = E.read_etdump(path)
    assert isinstance(read.buffer.data, bytes)
    assert read.to_doc() == mapped.to_doc() == E.read_etdump(before).to_doc()


def test_an_empty_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "empty.etdp"
    path.write_bytes(b"")
    with pytest.raises(ETDumpError, match=r"empty\.etdp.*the file is empty"):
        E.read_etdump(path)
