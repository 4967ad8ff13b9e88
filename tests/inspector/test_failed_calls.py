"""A failed call never poisons the Inspector: every later call behaves as if it had not happened.

Each ETRecord entry that is read on first use (the programs, the graph-map programs, the
representative inputs, the reference outputs) and each block's reference output is made to fail
once; the next read must give exactly what a fresh record gives, and a read that keeps failing must
keep raising the same error, never a different one (issue 24: an unreadable ``representative_inputs``
made every later call say "the ETRecord has no representative inputs").
"""

from __future__ import annotations

import io
import warnings
import zipfile
from pathlib import Path
from typing import Any

import pytest
import torch

from numdiff import Inspector, parse_etrecord
from numdiff.errors import ETRecordError
from numdiff.schema.etrecord import ETRecord
from tests.conftest import FIXTURES

MLP = FIXTURES / "mlp_fp32"
LAZY = ("exported_program", "edge_dialect_program", "graph_map", "_representative_inputs", "_reference_outputs")


def _with_graph_map(tmp_path: Path) -> Path:
    """mlp_fp32's ETRecord plus a graph-map program (a copy of the ATen program under ``extra/forward``)."""
    out = tmp_path / "etrecord.bin"
    with zipfile.ZipFile(MLP / "etrecord.bin") as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            dst.writestr(info, src.read(info))
        for suffix in ("", "_state_dict", "_constants", "_example_inputs"):
            dst.writestr("extra/forward" + suffix, src.read("exported_program" + suffix))
    return out


def _fail_once(record: ETRecord, attribute: str) -> list[int]:
    """Make the next read of ``attribute`` raise an ETRecordError, then read normally; returns the call count."""
    loader = record._loaders[attribute]
    calls: list[int] = []

    def flaky() -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise ETRecordError(record.path, f"entry {attribute!r}: simulated failure", "try again")
        return loader()

    record._loaders[attribute] = flaky
    return calls


def _same(a: object, b: object) -> None:
    """Equal values, programs compared by their graphs' code."""
    if isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys()
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        assert torch.equal(a, b)
    elif hasattr(a, "graph_module"):
        assert a.graph_module.code == b.graph_module.code  # type: ignore[attr-defined]
    else:
        assert a == b


@pytest.mark.parametrize("attribute", LAZY)
def test_a_failed_read_of_an_entry_is_retried(tmp_path: Path, attribute: str) -> None:
    path = _with_graph_map(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fresh, record = parse_etrecord(path), parse_etrecord(path)
    calls = _fail_once(record, attribute)
    with pytest.raises(ETRecordError, match="simulated failure"):
        getattr(record, attribute)
    assert record.has(attribute)  # still there, not taken for absent
    value = getattr(record, attribute)
    assert value is not None and value != {}
    _same(value, getattr(fresh, attribute))
    getattr(record, attribute)
    assert len(calls) == 2  # loaded once it succeeded, then kept


def test_an_entry_that_keeps_failing_keeps_its_error() -> None:
    """The reported case: the same named error on every call, never 'the ETRecord has no representative inputs'."""
    record = _record_with_entry("representative_inputs", b"\x80\x04not a torch.save archive")
    insp = _inspector(record)
    for _ in range(3):
        with pytest.raises(ETRecordError, match="representative_inputs"):
            insp.calculate_numeric_gap("MSE")


def _record_with_entry(name: str, data: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(MLP / "etrecord.bin") as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            dst.writestr(info, data if info.filename == name else src.read(info))
    return out.getvalue()


def _inspector(etrecord: object) -> Inspector:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if isinstance(etrecord, bytes):
            etrecord = parse_etrecord(etrecord)
        return Inspector(etdump_path=str(MLP / "etdump.etdp"), etrecord=etrecord,
                         debug_buffer_path=str(MLP / "debug_buffer.bin"))


@pytest.mark.parametrize(("attribute", "graph"), [("_representative_inputs", None),
                                                  ("_reference_outputs", None),
                                                  ("edge_dialect_program", "edge_dialect_exported_program")])
def test_the_gap_after_a_failed_gap_is_the_fresh_inspectors(attribute: str, graph: str | None) -> None:
    """(The ATen program is built straight from its JSON by the gap, which caches nothing before it succeeds.)"""
    expected = _inspector(str(MLP / "etrecord.bin")).calculate_numeric_gap("MSE", reference_graph=graph)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        record = parse_etrecord(MLP / "etrecord.bin")
    insp = _inspector(record)
    calls = _fail_once(record, attribute)
    if attribute != "_reference_outputs":  # the gap does not read the reference outputs: nothing to fail
        with pytest.raises(ETRecordError, match="simulated failure"):
            insp.calculate_numeric_gap("MSE", reference_graph=graph)
    else:
        with pytest.raises(ETRecordError, match="simulated failure"):
            insp.event_blocks[-1].reference_output  # noqa: B018 - the read is the failed call
    got = insp.calculate_numeric_gap("MSE", reference_graph=graph)
    assert list(got["gap"]) == list(expected["gap"])
    assert list(got["aot_ops"]) == list(expected["aot_ops"])
    assert list(got["runtime_ops"]) == list(expected["runtime_ops"])
    assert calls


def test_a_failed_reference_output_is_retried() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        record = parse_etrecord(MLP / "etrecord.bin")
    insp = _inspector(record)
    fresh = _inspector(str(MLP / "etrecord.bin"))
    block = next(b for b in insp.event_blocks if b.bundled_input_index is not None and b.run_output)
    index = insp.event_blocks.index(block)
    _fail_once(record, "_reference_outputs")
    with pytest.raises(ETRecordError, match="simulated failure"):
        block.reference_output  # noqa: B018 - the read is the test
    _same(block.reference_output, fresh.event_blocks[index].reference_output)
