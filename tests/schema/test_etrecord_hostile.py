"""Hostile ETRecords: each bad-input class gives one ETRecordError naming the file, entry and field.

Every file here is a copy of a real fixture with entries rewritten in ``tmp_path`` (the fixtures
are never touched). Memory is checked with tracemalloc around the parse, never time.
"""

from __future__ import annotations

import io
import json
import shutil
import tracemalloc
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from numdiff import use_limits
from numdiff.align._records import NoteKind, RuntimeOutput
from numdiff.align.pairing import pair_outputs
from numdiff.errors import ETRecordError
from numdiff.profile.symbolicate import resolve_debug_handles
from numdiff.schema.etrecord import parse_etrecord

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SOURCE = FIXTURES / "mlp_fp32" / "etrecord.bin"
EDGE = "edge_dialect_exported_program/forward"
ALL = sorted(str(p.parent.relative_to(FIXTURES)) for p in FIXTURES.rglob("etrecord.bin"))


def rewrite(
    tmp_path: Path,
    replace: dict[str, bytes] | None = None,
    *,
    infos: Callable[[zipfile.ZipInfo], None] | None = None,
    extra: list[tuple[zipfile.ZipInfo, bytes]] | None = None,
) -> Path:
    """A copy of the fixture with entries replaced (same order), ZipInfo tweaks and extra entries."""
    out = tmp_path / "etrecord.bin"
    with zipfile.ZipFile(SOURCE) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            data = (replace or {}).get(info.filename, src.read(info.filename))
            new = zipfile.ZipInfo(info.filename, info.date_time)
            if infos is not None:
                infos(new)
            dst.writestr(new, data)
        for info, data in extra or []:
            dst.writestr(info, data)
    return out


def set_central_flags(path: Path, name: bytes, flags: int) -> None:
    """OR ``flags`` into an entry's general-purpose bits in the central directory (zipfile resets them)."""
    data = bytearray(path.read_bytes())
    at = data.find(b"PK\x01\x02")
    while at >= 0:
        name_len = int.from_bytes(data[at + 28 : at + 30], "little")
        if data[at + 46 : at + 46 + name_len] == name:
            bits = int.from_bytes(data[at + 8 : at + 10], "little") | flags
            data[at + 8 : at + 10] = bits.to_bytes(2, "little")
        at = data.find(b"PK\x01\x02", at + 4)
    path.write_bytes(bytes(data))


def edited_program(edit: Callable[[dict[str, Any]], None], entry: str = EDGE) -> dict[str, bytes]:
    with zipfile.ZipFile(SOURCE) as z:
        program = json.loads(z.read(entry))
    edit(program)
    return {entry: json.dumps(program).encode()}


def nodes(program: dict[str, Any]) -> list[dict[str, Any]]:
    return program["graph_module"]["graph"]["nodes"]  # type: ignore[no-any-return]


def saved(value: Any) -> bytes:
    buffer = io.BytesIO()
    torch.save(value, buffer)
    return buffer.getvalue()


# ----------------------------------------------------------------------------- sizes and zip bombs
def test_zip_bomb_is_refused_before_inflating(tmp_path: Path) -> None:
    bomb = tmp_path / "etrecord.bin"
    shutil.copy(SOURCE, bomb)
    with zipfile.ZipFile(bomb, "a", compression=zipfile.ZIP_DEFLATED) as z, z.open("bomb", "w") as stream:
        chunk = b"\0" * (1 << 20)
        for _ in range(64):  # 64 MiB of zeros: about 64 KiB deflated
            stream.write(chunk)
    assert bomb.stat().st_size < 200_000
    tracemalloc.start()
    try:
        with pytest.raises(ETRecordError, match=r"entry 'bomb' declares 67108864 bytes.*max_entry_ratio") as info:
            parse_etrecord(bomb)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, f"parsing a refused bomb used {peak} bytes"
    assert str(bomb) in str(info.value) and "NUMDIFF_MAX_ENTRY_RATIO" in str(info.value)


def test_inflation_stops_at_the_cap_while_streaming(tmp_path: Path) -> None:
    """Defence in depth: whatever the directory declared, reading stops once an entry passes the cap."""
    from numdiff.limits import Limits
    from numdiff.schema.etrecord.entries import EntryReader

    bomb = tmp_path / "etrecord.bin"
    shutil.copy(SOURCE, bomb)
    with zipfile.ZipFile(bomb, "a", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("bomb", b"\0" * (32 << 20))
    with zipfile.ZipFile(bomb) as archive, use_limits(max_entry_ratio=1000.0):
        reader = EntryReader(archive, str(bomb))
        reader.check_directory()
        reader.limits = Limits(max_entry_bytes=2 << 20)  # as if the directory had understated the size
        tracemalloc.start()
        try:
            with pytest.raises(ETRecordError, match=r"entry 'bomb' inflates to at least \d+ bytes, more than the limit 2097152"):
                reader.read_bytes("bomb")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak < 8 << 20, f"streaming a bomb used {peak} bytes"


def test_entries_that_together_inflate_past_the_budget(tmp_path: Path) -> None:
    """Each entry alone fits the ratio, all of them together do not."""
    path = tmp_path / "etrecord.bin"
    shutil.copy(SOURCE, path)
    with zipfile.ZipFile(path, "a", compression=zipfile.ZIP_DEFLATED) as z:
        for i in range(3):
            z.writestr(f"debris{i}", b" " * (8 << 20))
    with use_limits(max_entry_ratio=(12 << 20) / path.stat().st_size), pytest.raises(
        ETRecordError, match=r"entry 'debris1' declares 8388608 bytes; entries would inflate to \d+ bytes, more than"
    ):
        parse_etrecord(path)


def test_entry_larger_than_the_absolute_cap(tmp_path: Path) -> None:
    with use_limits(max_entry_bytes=10_000), pytest.raises(
        ETRecordError, match=r"entry 'edge_dialect_exported_program/forward' declares 11493 bytes, more than the limit 10000 bytes \(max_entry_bytes\)"
    ):
        parse_etrecord(SOURCE)


def test_entry_inflating_past_its_declared_size_is_corrupt(tmp_path: Path) -> None:
    path = rewrite(tmp_path)
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as z:
        info = z.getinfo("debug_handle_map")
    # Shrink the declared size in the central directory: zipfile stops there and the CRC fails.
    at = data.find(b"PK\x01\x02")
    while at >= 0:
        name_len = int.from_bytes(data[at + 28 : at + 30], "little")
        if data[at + 46 : at + 46 + name_len] == b"debug_handle_map":
            data[at + 24 : at + 28] = (info.file_size - 5).to_bytes(4, "little")
        at = data.find(b"PK\x01\x02", at + 4)
    path.write_bytes(bytes(data))
    with pytest.raises(ETRecordError, match=r"entry 'debug_handle_map' cannot be read \(BadZipFile"):
        parse_etrecord(path)


def test_too_many_entries(tmp_path: Path) -> None:
    with use_limits(max_entries=5), pytest.raises(ETRecordError, match=r"lists 15 entries, more than the limit 5"):
        parse_etrecord(SOURCE)


# ----------------------------------------------------------------------------- zip structure
def test_unknown_compression_method(tmp_path: Path) -> None:
    def bzip2(info: zipfile.ZipInfo) -> None:
        info.compress_type = zipfile.ZIP_BZIP2

    with pytest.raises(ETRecordError, match=r"(?s)entry 'ETRECORD_V0' uses zip compression method 12, which numdiff does not inflate.*stored or deflate"):
        parse_etrecord(rewrite(tmp_path, infos=bzip2))


def test_encrypted_entry(tmp_path: Path) -> None:
    path = rewrite(tmp_path, extra=[(zipfile.ZipInfo("secret"), b"x")])
    set_central_flags(path, b"secret", 0x1)
    with pytest.raises(ETRecordError, match=r"entry 'secret' is encrypted"):
        parse_etrecord(path)


def test_entry_name_marked_utf8_but_not(tmp_path: Path) -> None:
    path = rewrite(tmp_path, extra=[(zipfile.ZipInfo("zzzz"), b"x")])
    path.write_bytes(path.read_bytes().replace(b"zzzz", b"\xff\xfezz"))
    set_central_flags(path, b"\xff\xfezz", 0x800)
    with pytest.raises(ETRecordError, match=r"entry name in the zip directory is marked UTF-8 but is not"):
        parse_etrecord(path)


def test_duplicate_entry_names(tmp_path: Path) -> None:
    with pytest.warns(UserWarning, match="Duplicate name"):
        path = rewrite(tmp_path, extra=[(zipfile.ZipInfo("debug_handle_map"), b"{}")])
    with pytest.raises(ETRecordError, match=r"entry 'debug_handle_map' appears twice"):
        parse_etrecord(path)


def test_bad_crc(tmp_path: Path) -> None:
    path = rewrite(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data.replace(b'"forward": {"0": 1', b'"forward": {"0": 7', 1))
    with pytest.raises(ETRecordError, match=r"cannot be read \(BadZipFile: Bad CRC-32"):
        parse_etrecord(path)


# ----------------------------------------------------------------------------- JSON map entries
@pytest.mark.parametrize(
    ("entry", "value", "match"),
    [
        ("debug_handle_map", {"forward": {"0": "x"}}, r"field forward → 0: Input should be a valid integer.*found 'x'"),
        ("debug_handle_map", {"forward": [1, 2]}, r"field forward: "),
        ("debug_handle_map", {"forward": {"0": [1, -2]}}, r"field forward → 0 → 1: Input should be greater than or equal to 0 \(found -2\)"),
        ("delegate_map", {"forward": {"0": {"name": 3}}}, r"field forward → 0 → name: "),
        ("delegate_map", {"forward": {"0": {"delegate_map": {"1": "h"}}}}, r"field forward → 0 → delegate_map → 1"),
        ("instruction_id_to_num_outs_map", {"forward": {"0": 2.5}}, r"field forward → 0: "),
        ("instruction_id_to_num_outs_map", {"forward": {"0": 2**63}}, r"field forward → 0: .*less than or equal to"),
        ("export_graph_id", "abc", r"entry 'export_graph_id': field \(top level\)"),
    ],
)
def test_malformed_json_map_field(tmp_path: Path, entry: str, value: Any, match: str) -> None:
    path = rewrite(tmp_path, {entry: json.dumps(value).encode()})
    with pytest.raises(ETRecordError, match=f"entry {entry!r}: {match}" if "top level" not in match else match) as info:
        parse_etrecord(path)
    assert str(path) in str(info.value) and "ExecuTorch writes" in str(info.value)


def test_num_outs_over_the_limit_is_refused_with_the_limit_named(tmp_path: Path) -> None:
    path = rewrite(tmp_path, {"instruction_id_to_num_outs_map": b'{"forward": {"0": 1000000}}'})
    with pytest.raises(ETRecordError, match=r"forward → 0: 1000000 outputs for one instruction, more than the limit 65536 \(max_outputs_per_instruction\)"):
        parse_etrecord(path)
    with use_limits(max_outputs_per_instruction=2_000_000):
        assert parse_etrecord(path)._instruction_id_to_num_outs_map == {"forward": {"0": 1000000}}


def test_huge_num_outputs_in_pairing_costs_one_note() -> None:
    runtime = {(5,): RuntimeOutput((5,), 0, "op", [torch.ones(2)], 2**63)}
    report = pair_outputs({(5,): torch.ones(2)}, runtime)
    assert len(report.pairs) == 1 and report.counts() == {NoteKind.RUNTIME_TOO_SHORT.value: 1}


def test_huge_num_outs_in_a_record_built_in_code_is_refused() -> None:
    from numdiff.profile.events import Event, EventBlock

    block = EventBlock(name="b", events=[Event(name="op", perf_data=None, _instruction_id=0)])
    with pytest.raises(ETRecordError, match=r"instruction 0 9223372036854775808 outputs"):
        resolve_debug_handles([block], {"0": [1]}, None, {"0": 2**63})


@pytest.mark.parametrize(
    ("handles", "delegates", "match"),
    [
        ({"0": "x"}, None, r"debug_handle_map entry for instruction 0 is 'x'; expected a handle or a list of handles"),
        ({"0": [1]}, {"0": [2]}, r"delegate_map entry for instruction 0 is a list, not a mapping"),
    ],
    ids=["handles", "delegate"],
)
def test_malformed_maps_in_a_record_built_in_code_are_refused(handles: Any, delegates: Any, match: str) -> None:
    from numdiff.profile.events import Event, EventBlock

    block = EventBlock(name="b", events=[Event(name="op", perf_data=None, _instruction_id=0)])
    with pytest.raises(ETRecordError, match=match):
        resolve_debug_handles([block], handles, delegates, None)


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"[" * 100_000 + b"]" * 100_000, r"JSON nested at least 100000 deep, more than the limit 200 \(max_nesting_depth\)"),
        (b'{"forward": {"0": 1', r"is not valid JSON"),
        (b'{"forward": {"\xff": 1}}', r"is not valid JSON \('utf-8' codec"),
    ],
    ids=["deep", "truncated", "not-utf8"],
)
def test_unparseable_json_map(tmp_path: Path, data: bytes, match: str) -> None:
    with pytest.raises(ETRecordError, match=r"entry 'debug_handle_map'.*" + match):
        parse_etrecord(rewrite(tmp_path, {"debug_handle_map": data}))


# ----------------------------------------------------------------------------- program graphs
def _set_first_tensor(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(program: dict[str, Any]) -> None:
        values = program["graph_module"]["graph"]["tensor_values"]
        values[next(iter(values))][key] = value

    return edit


def _dup(program: dict[str, Any]) -> None:
    nodes(program)[1]["name"] = nodes(program)[0]["name"]


def _meta(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(program: dict[str, Any]) -> None:
        nodes(program)[0].setdefault("metadata", {})[key] = value

    return edit


def _node_field(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(program: dict[str, Any]) -> None:
        nodes(program)[0][key] = value

    return edit


def _deep_program(program: dict[str, Any]) -> None:
    nest: Any = 0
    for _ in range(300):
        nest = [nest]
    program["graph_module"]["junk"] = nest


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (_dup, r"top-level graph: two nodes are named '\w+'; node names must be unique"),
        (_set_first_tensor("dtype", 99), r"tensor '\w+': field dtype: unknown scalar type 99"),
        (_set_first_tensor("layout", "strided"), r"field layout: unknown layout 'strided'"),
        (_set_first_tensor("strides", [{"as_int": 1}] * 3), r"2 sizes but 3 strides"),
        (_set_first_tensor("sizes", [{"as_int": 2**40}, {"as_int": 2**20}]), None),
        (_set_first_tensor("strides", [{"as_int": -1}]), r"field strides\[0\] is -1, not an integer in \[0, 2\^63\)"),
        (_meta("stack_trace", 5), r"node '\w+': field metadata.stack_trace is a int, not a string"),
        (_meta("nn_module_stack", ["a"]), r"field metadata.nn_module_stack is a list, not a string"),
        (_meta("debug_handle", "1e9"), r"field metadata.debug_handle '1e9' is not an integer"),
        (_node_field("target", ["x"]), r"field target is list, not a string"),
        (_node_field("inputs", {"a": 1}), r"field inputs is not a list of objects"),
        (_deep_program, r"program JSON nested at least 30\d deep"),
        (_node_field("outputs", [1]), r"field outputs\[0\] is 1, not an object with one argument kind"),
        (_node_field("inputs", [{"name": "x", "arg": {"as_tensor": 5}}]), r"field inputs\[0\].arg.as_tensor: malformed or unknown value 5"),
        (_node_field("inputs", [{"name": "x", "arg": {"as_ints": [1, "2"]}}]), r"field inputs\[0\].arg.as_ints: malformed"),
        (_node_field("inputs", [{"name": 3, "arg": {"as_int": 1}}]), r"field inputs\[0\] is not an object with a string name"),
        (_meta("from_node", '[{"action": 5}]'), r"field metadata.from_node: \{'action': 5\} is not a node-source object"),
        (_meta("from_node", '{"a": 1}'), r"field metadata.from_node: a dict where a list of objects belongs"),
        (_node_field("metadata", [1]), r"field metadata is a list, not an object"),
        (_node_field("name", ""), r"node 0: field name is '', not a non-empty string"),
    ],
    ids=["duplicate-names", "scalar-type", "layout", "sizes-vs-strides", "big-but-fine", "negative-stride",
         "stack-trace-type", "module-stack-type", "debug-handle", "target", "inputs", "deep",
         "outputs", "arg-tensor", "arg-ints", "arg-name", "from-node-action", "from-node-type", "metadata", "name"],
)
def test_malformed_program_graph(tmp_path: Path, edit: Callable[[dict[str, Any]], None], match: str | None) -> None:
    path = rewrite(tmp_path, edited_program(edit))
    if match is None:  # a large size alone is a valid description (nothing is allocated from it)
        parse_etrecord(path).check_programs()
        return
    with pytest.raises(ETRecordError, match=f"entry '{EDGE}': .*{match}"):
        parse_etrecord(path).check_programs()


def test_program_json_past_the_recursion_limit_is_refused_at_parse(tmp_path: Path) -> None:
    path = rewrite(tmp_path, {EDGE: b"[" * 100_000 + b"]" * 100_000})
    with pytest.raises(ETRecordError, match=f"entry '{EDGE}': program JSON nested deeper than Python's recursion limit"):
        parse_etrecord(path)


def test_a_malformed_graph_is_refused_before_it_is_built(tmp_path: Path) -> None:
    rec = parse_etrecord(rewrite(tmp_path, edited_program(_dup)))
    with pytest.raises(ETRecordError, match=r"two nodes are named"):
        rec.edge_dialect_program  # noqa: B018 - building is the test


def test_a_malformed_aten_graph_is_refused_before_the_direct_builder_sees_it(tmp_path: Path) -> None:
    rec = parse_etrecord(rewrite(tmp_path, edited_program(_dup, "exported_program")))
    with pytest.raises(ETRecordError, match=r"entry 'exported_program': top-level graph: two nodes are named"):
        rec.program_source("exported_program")


def test_node_shapes_the_profiling_view_reads_are_checked_as_read(tmp_path: Path) -> None:
    rec = parse_etrecord(rewrite(tmp_path, edited_program(_meta("stack_trace", 5))))
    with pytest.raises(ETRecordError, match=r"Edge program 'forward': node '\w+': field metadata.stack_trace is not a string"):
        rec.op_nodes()


def test_malformed_module_stack_text_is_named_when_read(tmp_path: Path) -> None:
    rec = parse_etrecord(rewrite(tmp_path, edited_program(_meta("nn_module_stack", "a,b"))))
    with pytest.raises(ETRecordError, match=r"Edge program 'forward': malformed nn_module_stack item 'a,b'"):
        rec.op_nodes()


def test_malformed_signature(tmp_path: Path) -> None:
    def edit(program: dict[str, Any]) -> None:
        program["graph_module"]["signature"]["input_specs"][0] = {"parameter": 3}

    rec = parse_etrecord(rewrite(tmp_path, edited_program(edit, "exported_program")))
    with pytest.raises(ETRecordError, match=r"signature.input_specs\[0\] is \{'parameter': 3\}, not one spec object"):
        rec.program_source("exported_program")


def test_tensor_meta_overflowing_64_bits(tmp_path: Path) -> None:
    def edit(program: dict[str, Any]) -> None:
        meta = {"dtype": 7, "sizes": [{"as_int": 2**40}] * 2, "strides": [{"as_int": 2**40}, {"as_int": 1}],
                "storage_offset": {"as_int": 0}, "layout": 7}
        program["graph_module"]["graph"]["tensor_values"]["evil"] = meta

    with pytest.raises(ETRecordError, match=r"tensor 'evil': sizes \[1099511627776, 1099511627776\] .* overflow 64 bits"):
        parse_etrecord(rewrite(tmp_path, edited_program(edit))).check_programs()


def test_too_many_graph_nodes(tmp_path: Path) -> None:
    with use_limits(max_graph_nodes=3):
        rec = parse_etrecord(SOURCE)
    with pytest.raises(ETRecordError, match=r"more than 3 nodes \(max_graph_nodes\)"):
        rec.check_programs()  # checked with the limits in force when the file was read


def test_deep_from_node_is_refused_on_the_way_in(tmp_path: Path) -> None:
    def edit(program: dict[str, Any]) -> None:
        nodes(program)[0].setdefault("metadata", {})["from_node"] = "[" * 5000 + "]" * 5000

    with pytest.raises(ETRecordError, match=r"node '\w+': field metadata.from_node: JSON nested at least 5000 deep"):
        parse_etrecord(rewrite(tmp_path, edited_program(edit))).check_programs()


def test_from_node_of_the_wrong_shape(tmp_path: Path) -> None:
    def edit(program: dict[str, Any]) -> None:
        for node in nodes(program):
            node.setdefault("metadata", {})["from_node"] = '[{"from_node": 5}]'

    rec = parse_etrecord(rewrite(tmp_path, edited_program(edit)))
    with pytest.raises(ETRecordError, match=r"malformed from_node metadata: int where a list of objects belongs"):
        rec.edge_provenance()


# ----------------------------------------------------------------------------- pickled entries
def _rezip(data: bytes, edit: Callable[[str, bytes], bytes], method: int = zipfile.ZIP_STORED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w", compression=method) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, edit(info.filename, src.read(info.filename)))
    return out.getvalue()


def _torn(data: bytes) -> bytes:
    """A torch.save zip whose pickle stream is cut short (a raw UnpicklingError in torch.load)."""
    return _rezip(data, lambda name, body: body[: len(body) // 2] if name.endswith("data.pkl") else body)


def _deflated(data: bytes) -> bytes:
    """The same torch.save zip with its records deflated: a few KiB that torch would inflate whole."""
    return _rezip(data, lambda name, body: body, zipfile.ZIP_DEFLATED)


def _cycle() -> list[Any]:
    loop: list[Any] = []
    loop.append(loop)
    return loop


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"not a pickle at all", r"entry 'representative_inputs' is neither a torch.save zip archive nor a pickle \(it starts with b'not a pi'\)"),
        (b"PK\x03\x04truncated", r"is not a readable torch.save archive \(BadZipFile"),
        (_torn(saved([(torch.ones(3),)])), r"cannot be loaded with torch.load\(weights_only=True\): "),
        (_deflated(saved([(torch.zeros(8 << 20, dtype=torch.uint8),)])), r"records would inflate to \d+ bytes, more than"),
        (saved([(torch.zeros(1).expand(2**40),)]), r"shape \[1099511627776\] \(strides \[0\]\) describes 4398046511104 bytes"),
        (saved([(torch.float32,)]), r"\[0\]\[0\] holds a torch.dtype; it holds only tensors"),
        (saved(_cycle()), r"entry 'representative_inputs'\[0\] contains itself"),
    ],
    ids=["garbage", "truncated-zip", "bad-pickle", "inner-bomb", "stride-0", "dtype", "cycle"],
)
def test_bad_pickled_representative_inputs(tmp_path: Path, data: bytes, match: str) -> None:
    rec = parse_etrecord(rewrite(tmp_path, {"representative_inputs": data}))
    with pytest.raises(ETRecordError, match=match) as info:
        rec._representative_inputs  # noqa: B018 - loading is the test
    assert str(tmp_path) in str(info.value)


def test_deeply_nested_pickle(tmp_path: Path) -> None:
    nest: Any = torch.ones(1)
    for _ in range(300):
        nest = [nest]
    rec = parse_etrecord(rewrite(tmp_path, {"reference_outputs": saved({"forward": nest})}))
    with pytest.raises(ETRecordError, match=r"containers nested more than 200 deep \(max_nesting_depth\)"):
        rec._reference_outputs  # noqa: B018


def test_stride_zero_expansion_within_the_allowance_loads(tmp_path: Path) -> None:
    value = [(torch.zeros(1).expand(1000),)]
    rec = parse_etrecord(rewrite(tmp_path, {"representative_inputs": saved(value)}))
    assert rec._representative_inputs[0][0].shape == (1000,)


# ----------------------------------------------------------------------------- real files still load
@pytest.mark.parametrize("name", ALL)
def test_every_fixture_loads_with_the_default_limits(name: str) -> None:
    rec = parse_etrecord(FIXTURES / name / "etrecord.bin")
    rec.check_programs()
    assert rec.op_nodes() is not None
    assert rec._representative_inputs is not None and rec._reference_outputs is not None
