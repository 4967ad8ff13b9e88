"""Hostile debug-buffer views: every bad tensor description is a named error, never a silent read.

Tensors are described by hand (``Tensor``), by dumps crafted with ``etdump_writer`` and read
through the ``Inspector``, and by byte-level mutations of the real fixtures' ETDumps.
"""

from __future__ import annotations

import struct
import warnings
from pathlib import Path

import pytest
import torch

from numdiff.errors import DebugBufferError, ETDumpError, NumdiffError
from numdiff.inspector import Inspector
from numdiff.schema.debug_buffer import MAX_DIMS, DebugBuffer, inflate_value, tensor_layout
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
    read_value,
)
from numdiff.schema.etdump.writer import write_etdump

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REPO = Path(__file__).resolve().parents[2]
#: Every real dump written with a debug buffer (fp16_debug's dumps are unreadable by design).
WITH_BUFFER = sorted(str(p.parent.relative_to(REPO)) for root in (FIXTURES, REPO / "numdiff" / "examples")
                     for p in root.rglob("debug_buffer.bin") if p.parent.name != "fp16_debug")
FLOAT = int(ScalarType.FLOAT)


def _buffer(tmp_path: Path, size: int = 256) -> DebugBuffer:
    path = tmp_path / "debug.bin"
    path.write_bytes(bytes(range(256)) * (size // 256) + bytes(size % 256))
    return DebugBuffer(path)


# --- one tensor on its own ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tensor", "message"),
    [
        (Tensor(FLOAT, (4,), (1,), -16), r"offset -16 has a negative offset for 16 bytes"),
        (Tensor(FLOAT, (4,), (1,), 250), r"offset 250 needs 16 bytes, past the end of the 256-byte buffer"),
        (Tensor(FLOAT, (2**62, 2**62), (2**62, 1), 0), r"sizes \[4611686018427387904, 4611686018427387904\] whose byte count overflows 64 bits"),
        (Tensor(FLOAT, (2**40, 4), (), 0), r"offset 0 needs 17592186044416 bytes, past the end"),
        (Tensor(FLOAT, (-3,), (1,), 0), r"negative sizes \[-3\]"),
        (Tensor(FLOAT, (2, 2), (-2, 1), 0), r"negative strides \[-2, 1\]"),
        (Tensor(FLOAT, (4, 4), (0, 1), 0), r"strides \[0, 1\] that do not lay out sizes \[4, 4\] densely"),
        (Tensor(FLOAT, (4, 4), (8, 1), 0), r"strides \[8, 1\] that do not lay out"),
        (Tensor(FLOAT, (2, 3), (1,), 0), r"1 strides \[1\] for 2 sizes \[2, 3\]"),
        (Tensor(FLOAT, (0, 2**62, 4), (), 0), r"byte count overflows 64 bits"),
        (Tensor(FLOAT, (1,) * (MAX_DIMS + 1), (), 0), rf"has {MAX_DIMS + 1} dimensions"),
    ],
    ids=["negative-offset", "past-end", "huge-sizes", "large-sizes", "negative-size", "negative-stride", "stride-0",
         "gapped-strides", "stride-count", "empty-overflow", "too-many-dims"],
)
def test_bad_tensor_is_a_debug_buffer_error(tmp_path: Path, tensor: Tensor, message: str) -> None:
    buf = _buffer(tmp_path)
    with pytest.raises(DebugBufferError, match=message):
        buf.tensor(tensor, "event 'x'")


def test_unknown_scalar_type_is_named_with_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(ETDumpError, match=r"unknown scalar type 42\n.*6 \(FLOAT\)"):
        _buffer(tmp_path).tensor(Tensor(42, (1,), (1,), 0))


def test_bad_tensor_without_a_buffer_is_still_an_error() -> None:
    value = Value(ValueType.TENSOR, tensor=Tensor(FLOAT, (-1, 2), (), 0))
    with pytest.raises(DebugBufferError, match=r"event 'e': tensor at offset 0 has negative sizes"):
        inflate_value(value, None, where="event 'e'")
    with pytest.raises(ETDumpError, match="unknown scalar type 77"):
        inflate_value(Value(ValueType.TENSOR, tensor=Tensor(77, (1,), (), 0)), None)


def test_valid_layouts_pass(tmp_path: Path) -> None:
    buf = _buffer(tmp_path)
    # permuted (channels-last) strides, a size-1 dim with any stride, an empty tensor at offset -1
    assert buf.tensor(Tensor(FLOAT, (1, 2, 3, 4), (24, 1, 8, 2), 0)).shape == (1, 2, 3, 4)
    assert buf.tensor(Tensor(FLOAT, (3, 1), (1, 99), 0)).shape == (3, 1)
    assert buf.tensor(Tensor(FLOAT, (0,), (1,), -1)).shape == (0,)
    assert tensor_layout(Tensor(int(ScalarType.DOUBLE), (2, 3), (), 8)).nbytes == 48


def test_tensors_equal_checks_both_layouts(tmp_path: Path) -> None:
    buf = _buffer(tmp_path)
    a = Tensor(FLOAT, (2,), (1,), 0)
    assert buf.tensors_equal(a, a)
    with pytest.raises(DebugBufferError, match="negative sizes"):
        buf.tensors_equal(Tensor(FLOAT, (-2,), (1,), 0), Tensor(FLOAT, (-2,), (1,), 0))


# --- overlaps -----------------------------------------------------------------------------------------


def test_partial_overlap_names_both_tensors(tmp_path: Path) -> None:
    buf = _buffer(tmp_path)
    a, b = Tensor(FLOAT, (8,), (1,), 0), Tensor(FLOAT, (8,), (1,), 16)
    with pytest.raises(DebugBufferError, match=r"two logged tensors overlap: event 'a' \(FLOAT, bytes 0\.\.32\) "
                                               r"and event 'b' \(FLOAT, bytes 16\.\.48\)"):
        buf.check_no_overlap([(a, "event 'a'"), (b, "event 'b'")])


def test_same_bytes_with_another_type_is_an_overlap(tmp_path: Path) -> None:
    buf = _buffer(tmp_path)
    a, b = Tensor(FLOAT, (4,), (1,), 0), Tensor(int(ScalarType.INT), (4,), (1,), 0)
    with pytest.raises(DebugBufferError, match=r"overlap: .*FLOAT.* and .*INT"):
        buf.check_no_overlap([(a, "a"), (b, "b")])


def test_a_tensor_inside_a_larger_one_is_an_overlap(tmp_path: Path) -> None:
    big, small, later = Tensor(FLOAT, (16,), (1,), 0), Tensor(FLOAT, (2,), (1,), 8), Tensor(FLOAT, (2,), (1,), 64)
    with pytest.raises(DebugBufferError, match=r"overlap: big .* and small"):
        _buffer(tmp_path).check_no_overlap([(later, "later"), (small, "small"), (big, "big")])


def test_identical_and_disjoint_and_empty_tensors_are_fine(tmp_path: Path) -> None:
    a = Tensor(FLOAT, (4,), (1,), 0)
    empty = Tensor(FLOAT, (0,), (1,), -1)
    _buffer(tmp_path).check_no_overlap([(a, "a"), (a, "a again"), (Tensor(FLOAT, (4,), (1,), 16), "b"),
                                        (empty, "e1"), (empty, "e2")])


# --- through the Inspector, with crafted dumps ----------------------------------------------------------


def _debug_event(name: str, tensor: Tensor, instruction: int) -> Event:
    value = Value(ValueType.TENSOR, tensor=tensor, output=False)
    return Event(debug_event=DebugEvent(0, instruction, value, -1, None, name))


def _profile_event(name: str, instruction: int) -> Event:
    return Event(profile_event=ProfileEvent(name, 0, instruction, -1, None, None, 10, 20))


def _inspect(tmp_path: Path, events: list[Event]) -> Inspector:
    dump = tmp_path / "crafted.etdp"
    dump.write_bytes(write_etdump(ETDumpDoc(run_data=[RunDoc("Execute", events)])))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Inspector(etdump_path=dump, debug_buffer_path=_buffer(tmp_path).path)


def test_inspector_rejects_overlapping_logged_tensors(tmp_path: Path) -> None:
    events = [_profile_event("op", 0), _debug_event("op", Tensor(FLOAT, (8,), (1,), 0), 0),
              _profile_event("op2", 1), _debug_event("op2", Tensor(FLOAT, (4,), (1,), 8), 1)]
    with pytest.raises(DebugBufferError, match=r"debug\.bin.*two logged tensors overlap: event 'op' of run "
                                               r"'Execute' #0 value 0 \(FLOAT, bytes 0\.\.32\) and event 'op2'"):
        _inspect(tmp_path, events)


def test_inspector_names_the_etdump_for_an_unknown_scalar_type(tmp_path: Path) -> None:
    events = [_profile_event("op", 0), _debug_event("op", Tensor(100, (1,), (1,), 0), 0)]
    with pytest.raises(ETDumpError, match=r"crafted\.etdp.*Tensor\.scalar_type is 100, not a known scalar type"):
        _inspect(tmp_path, events)


def test_inspector_reads_disjoint_tensors(tmp_path: Path) -> None:
    events = [_profile_event("op", 0), _debug_event("op", Tensor(FLOAT, (4,), (1,), 0), 0),
              _profile_event("op2", 1), _debug_event("op2", Tensor(FLOAT, (4,), (1,), 16), 1)]
    data = [ev.debug_data[0] for ev in _inspect(tmp_path, events).event_blocks[0].events]
    expected = torch.frombuffer(bytearray(range(32)), dtype=torch.float32)
    assert torch.equal(data[0], expected[:4]) and torch.equal(data[1], expected[4:])


# --- real fixtures -------------------------------------------------------------------------------------


def _tensor_tables(etdump: Path) -> list[tuple[int, Tensor]]:
    """(position of the Tensor table, its record) for every logged tensor of a real dump."""
    dump = read_etdump(etdump)
    out = []
    for run in dump.run_data:
        for pos in run.columns.value[run.columns.value >= 0].tolist():
            value = dump.buffer.table(int(pos), "Value")
            sub = value.subtable(1, "Tensor")
            tensor = read_value(dump.buffer, int(pos)).tensor
            if sub is not None and tensor is not None:
                out.append((sub.pos, tensor))
    return out


@pytest.mark.parametrize("name", WITH_BUFFER)
def test_every_real_fixture_passes_the_layout_and_overlap_checks(name: str) -> None:
    folder = REPO / name
    buf = DebugBuffer(folder / "debug_buffer.bin")
    tables = _tensor_tables(folder / "etdump.etdp")
    assert tables
    buf.check_no_overlap([(t, f"tensor {i}") for i, (_, t) in enumerate(tables)])


def _offset_field(data: bytes, table_pos: int) -> int:
    """Byte position of a Tensor table's ``offset`` field (field 3)."""
    vtable = table_pos - struct.unpack_from("<i", data, table_pos)[0]
    field = int(struct.unpack_from("<H", data, vtable + 4 + 2 * 3)[0])
    assert field
    return table_pos + field


@pytest.mark.parametrize("name", ["mlp_fp32", "attention_view"])
def test_real_dump_with_a_tensor_moved_onto_another_is_rejected(tmp_path: Path, name: str) -> None:
    src = FIXTURES / name / "etdump.etdp"
    tables = [(p, t) for p, t in _tensor_tables(src) if t.sizes and min(t.sizes) > 0]
    (pos_a, a), (pos_b, b) = tables[0], tables[1]
    data = bytearray(src.read_bytes())
    struct.pack_into("<q", data, _offset_field(bytes(data), pos_b), a.offset + 4)  # b now starts inside a
    bad = tmp_path / "etdump.etdp"
    bad.write_bytes(bytes(data))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(DebugBufferError, match="two logged tensors overlap"):
            Inspector(etdump_path=bad, debug_buffer_path=FIXTURES / name / "debug_buffer.bin")


@pytest.mark.parametrize("value", [-(2**63), -8, 2**63 - 1, 2**40])
def test_real_dump_with_a_wild_tensor_offset_is_rejected(tmp_path: Path, value: int) -> None:
    src = FIXTURES / "mlp_fp32" / "etdump.etdp"
    pos, _ = _tensor_tables(src)[0]
    data = bytearray(src.read_bytes())
    struct.pack_into("<q", data, _offset_field(bytes(data), pos), value)
    bad = tmp_path / "etdump.etdp"
    bad.write_bytes(bytes(data))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(DebugBufferError, match=r"offset -?\d+ (needs \d+ bytes, past the end|has a negative offset)"):
            Inspector(etdump_path=bad, debug_buffer_path=FIXTURES / "mlp_fp32" / "debug_buffer.bin")


def test_real_dump_with_a_wild_size_is_rejected(tmp_path: Path) -> None:
    src = FIXTURES / "mlp_fp32" / "etdump.etdp"
    dump = read_etdump(src)
    pos, _ = _tensor_tables(src)[0]
    sizes = dump.buffer.table(pos, "Tensor").vector(1, 8, "sizes")
    assert sizes is not None
    for value, message in [(2**63 - 1, "overflows 64 bits"), (2**40, "past the end"), (-5, "negative sizes")]:
        data = bytearray(src.read_bytes())
        struct.pack_into("<q", data, sizes[0], value)
        bad = tmp_path / "etdump.etdp"
        bad.write_bytes(bytes(data))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(NumdiffError, match=message):
                Inspector(etdump_path=bad, debug_buffer_path=FIXTURES / "mlp_fp32" / "debug_buffer.bin")
