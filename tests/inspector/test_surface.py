"""The rest of the 1.5.1 Inspector surface on real fixtures: op_graph_dict, reference_graph_name,
get_op_list (counts and latency statistics), write_tensorboard_artifact, multi-method blocks."""

from __future__ import annotations

import struct
import warnings
from pathlib import Path
from typing import Any

import pytest

from numdiff import Inspector, parse_etrecord
from numdiff.errors import MissingDependencyError, UnknownNameError, UsageTypeError
from tests.conftest import FIXTURES, load_expected

MLP = FIXTURES / "mlp_fp32"
XNN = FIXTURES / "xnnpack"
TWO = FIXTURES / "realistic" / "real_two_methods"
SKIPPED = {"OPERATOR_CALL", "Method::init", "Program::load_method", "Method::execute"}


def _inspector(folder: Path, **kw: Any) -> Inspector:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        debug = folder / "debug_buffer.bin"
        return Inspector(etdump_path=str(folder / "etdump.etdp"), etrecord=kw.pop("etrecord", str(folder / "etrecord.bin")),
                         debug_buffer_path=str(debug) if debug.is_file() else None, **kw)


def _recorded_events(name: str, block: str) -> list[dict[str, Any]]:
    blocks = load_expected(name)["inspector"]["event_blocks"]
    return [ev for b in blocks if b["name"] == block for ev in b["events"]]


# --- op_graph_dict and reference_graph_name ---------------------------------------------------

def test_op_graph_dict_lists_the_edge_graph_ops_the_events_map_to() -> None:
    insp = _inspector(MLP)
    graphs = insp.op_graph_dict
    assert graphs is not None and list(graphs) == ["edge_dialect_graph_module"]
    graph = graphs["edge_dialect_graph_module"]
    ops = {n.op for n in graph.elements}
    recorded = {t for ev in _recorded_events("mlp_fp32", "Execute") for t in ev["op_types"]}
    assert recorded and recorded <= ops
    by_handle = graph.nodes_by_debug_handle()
    assert all(isinstance(h, int) for h in by_handle) and any(len(v) == 2 for v in by_handle.values())  # Linear
    assert all("stack_trace" in n.metadata for n in graph.elements)
    with pytest.raises(KeyError, match="no graph named 'nope'"):
        graphs["nope"]


def test_op_graph_dict_is_none_without_an_etrecord() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert Inspector(etdump_path=str(MLP / "etdump.etdp")).op_graph_dict is None


def test_reference_graph_name_selects_a_graph_map_entry() -> None:
    rec = parse_etrecord(MLP / "etrecord.bin")
    rec.graph_map = {"edge_after_transform/forward": rec.edge_dialect_program}
    default = _inspector(MLP)
    chosen = _inspector(MLP, etrecord=rec, reference_graph_name="edge_after_transform/forward")
    assert [[e.op_types for e in b.events] for b in chosen.event_blocks] == \
        [[e.op_types for e in b.events] for b in default.event_blocks]
    assert list(chosen.op_graph_dict or {}) == ["edge_after_transform/forward", "edge_dialect_graph_module"]


def test_unknown_reference_graph_name_is_a_key_error_listing_the_graphs() -> None:
    with pytest.raises(KeyError, match="(?s)reference_graph_name 'nope' is not a graph.*edge_dialect_graph_module") as info:
        _inspector(MLP, reference_graph_name="nope")
    assert isinstance(info.value, UnknownNameError)


def test_unsupported_etrecord_type_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="Unsupported ETRecord type") as info:
        Inspector(etdump_path=str(MLP / "etdump.etdp"), etrecord=3.5)
    assert isinstance(info.value, UsageTypeError)


# --- get_op_list ------------------------------------------------------------------------------

def test_op_list_groups_events_and_its_totals_match_the_recorded_perf_data() -> None:
    insp = _inspector(MLP)
    ops = insp.get_op_list("Execute")
    recorded = [ev for ev in _recorded_events("mlp_fp32", "Execute") if ev["name"] not in SKIPPED]
    assert sorted(ops) == sorted({ev["name"] for ev in recorded})
    assert sum(len(v) for v in ops.values()) == len(recorded)
    df = ops.to_dataframe()
    assert list(df.columns) == ["op", "count", "runs", "total_avg", "avg", "p50", "min", "max", "share",
                                "delegated", "delegate_backend_name", "op_types"]
    assert ops.unit == "ms" and df.attrs["unit"] == "ms"
    assert df["total_avg"].sum() == pytest.approx(sum(ev["perf_data"]["avg"] for ev in recorded))
    assert df["share"].sum() == pytest.approx(1.0)
    assert list(df["total_avg"]) == sorted(df["total_avg"], reverse=True)
    addmm = df.set_index("op").loc["native_call_addmm.out"]
    samples = [x for ev in recorded if ev["name"] == "native_call_addmm.out" for x in ev["perf_data"]["raw"]]
    assert addmm["count"] == 2 and addmm["runs"] == 3
    assert addmm["min"] == pytest.approx(min(samples)) and addmm["max"] == pytest.approx(max(samples))
    assert "aten.addmm.default" in addmm["op_types"]


def test_op_list_can_hide_the_ops_inside_delegates() -> None:
    insp = _inspector(XNN)
    full = insp.get_op_list("Execute")
    delegated = {op for op, evs in full.items() if all(e.is_delegated_op for e in evs)}
    assert delegated and "DELEGATE_CALL" in full
    assert not any(op.endswith(("#1", "#2")) for op in full)  # instance numbers dropped
    short = insp.get_op_list("Execute", show_delegated_ops=False)
    assert set(short) == set(full) - delegated
    assert short.to_dataframe().set_index("op").loc["DELEGATE_CALL", "delegate_backend_name"] == "XnnpackBackend"


def test_op_list_of_an_unknown_block_lists_the_names() -> None:
    with pytest.raises(KeyError, match="(?s)no event block named 'Forward'.*Execute"):
        _inspector(MLP).get_op_list("Forward")


# --- write_tensorboard_artifact ---------------------------------------------------------------

def _read_events(folder: Path) -> list[Any]:
    from tensorboardX.proto import event_pb2

    out = []
    for path in sorted(folder.glob("events.out.tfevents.*")):
        data = path.read_bytes()
        offset = 0
        while offset < len(data):
            (length,) = struct.unpack_from("<Q", data, offset)
            body = data[offset + 12: offset + 12 + length]
            offset += 12 + length + 4
            event = event_pb2.Event()
            event.ParseFromString(body)
            out.append(event)
    return out


def test_tensorboard_artifact_has_per_run_latency_scalars_histograms_and_the_op_table(tmp_path: Path) -> None:
    pytest.importorskip("tensorboardX")
    insp = _inspector(MLP)
    insp.write_tensorboard_artifact(tmp_path / "tb")
    runs = sorted(p.name for p in (tmp_path / "tb").iterdir())
    assert runs == ["00_Default", "01_Execute_forward"]  # one run per block, named by block and method
    execute = tmp_path / "tb" / "01_Execute_forward"
    values = [v for e in _read_events(execute) for v in e.summary.value]
    scalars: dict[str, list[tuple[int, float]]] = {}
    for e in _read_events(execute):
        for v in e.summary.value:
            if v.HasField("simple_value"):
                scalars.setdefault(v.tag, []).append((e.step, v.simple_value))
    addmm = [ev for ev in _recorded_events("mlp_fp32", "Execute") if ev["name"] == "native_call_addmm.out"]
    per_run = [sum(ev["perf_data"]["raw"][r] for ev in addmm) for r in range(3)]
    assert [s for s, _ in scalars["latency/native_call_addmm.out"]] == [0, 1, 2]
    assert [v for _, v in scalars["latency/native_call_addmm.out"]] == pytest.approx(per_run, rel=1e-6)
    assert "latency/block_total" in scalars
    assert any(v.tag == "latency_histogram/native_call_addmm.out" and v.HasField("histo") for v in values)
    text = [v for v in values if v.tag.startswith("op_list")]
    assert text and b"native_call_addmm.out" in text[0].tensor.string_val[0]


def test_tensorboard_without_the_extra_names_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import builtins

    real_import = builtins.__import__

    def no_tensorboardx(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("tensorboardX"):
            raise ImportError("No module named 'tensorboardX'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_tensorboardx)
    with pytest.raises(MissingDependencyError, match=r"pip install -c constraints.txt -e '\.\[tensorboard\]'"):
        _inspector(MLP).write_tensorboard_artifact(tmp_path)


def test_tensorboard_refuses_a_file_path(tmp_path: Path) -> None:
    pytest.importorskip("tensorboardX")
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(ValueError, match="exists and is not a folder"):
        _inspector(MLP).write_tensorboard_artifact(target)


# --- multi-method programs --------------------------------------------------------------------

@pytest.fixture(scope="module")
def two_methods() -> Inspector:
    if not (TWO / "etdump.etdp").is_file():
        pytest.skip("the realistic two-method fixture is not generated (scripts/make_realistic_fixtures.py)")
    return _inspector(TWO)


def test_each_execute_block_names_its_method_and_gets_that_methods_ops(two_methods: Inspector) -> None:
    blocks = {b.method_name: b for b in two_methods.event_blocks if b.name == "Execute"}
    assert sorted(blocks) == ["encode", "forward"]  # `name` stays "Execute", as in the reference
    ops = {m: [e.name for e in b.events if e.name.startswith("native_call_")] for m, b in blocks.items()}
    assert "native_call_tanh.out" in ops["encode"] and "native_call_sigmoid.out" in ops["forward"]
    tanh = next(e for e in blocks["encode"].events if e.name == "native_call_tanh.out")
    assert tanh.op_types == ["aten.tanh.default"]  # symbolicated with encode's graph, not forward's
    sigmoid = next(e for e in blocks["forward"].events if e.name == "native_call_sigmoid.out")
    assert sigmoid.op_types == ["aten.sigmoid.default"] and sigmoid.debug_handles is not None
    assert all(e.debug_handles is not None for b in blocks.values() for e in b.events if e.name != "Method::execute")
    assert [b.method_name for b in two_methods.event_blocks if b.name != "Execute"] == [None]
    assert set(two_methods.get_op_list("encode")) == {"native_call_permute_copy.out", "native_call_addmm.out",
                                                      "native_call_tanh.out"}


def test_single_method_blocks_name_forward() -> None:
    insp = _inspector(MLP)
    assert [b.method_name for b in insp.event_blocks] == [None, "forward"]


def test_gap_report_rows_carry_the_method() -> None:
    df = _inspector(MLP).numeric_gap_report("SNR").to_dataframe()
    assert len(df) and set(df["method"]) == {"forward"}
