"""Delegate scratch buffers (export schema 5.5, pytorch/executorch#21985) are dropped before pairing.

The artifacts are real oracle fixtures (ExecuTorch 1.5.1) edited to the upstream format by
``tests/upstream_formats.py``: the ETRecord gains a lowered program (``graph_map``, as
``add_extra_export_modules`` records it) whose lowered modules declare ``scratch_specs``, and each
``DELEGATE_CALL`` logs one ``uint8`` value per scratch buffer after its outputs, as the runtime
logs every argument of a delegate call. No released ExecuTorch writes this yet.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch

from numdiff.align import PartitionScratch, RuntimeOutput, drop_scratch
from numdiff.errors import ETRecordError, MismatchedArtifactsError, MissingDataError
from numdiff.inspector import Inspector
from tests.conftest import FIXTURES, load_expected
from tests.oracle_values import same_gap
from tests.upstream_formats import with_delegate_scratch, with_lowered_program

LLAMA = FIXTURES / "realistic" / "real_llama_xnn"
LLAMA_CALLS = 14  # DELEGATE_CALLs per run in that fixture


def _edited(tmp_path: Path, fixture: Path, declared: list[list[int]], logged: list[list[int]]) -> Inspector:
    etrecord = with_lowered_program((fixture / "etrecord.bin").read_bytes(), declared)
    etdump, buffer = with_delegate_scratch((fixture / "etdump.etdp").read_bytes(),
                                           (fixture / "debug_buffer.bin").read_bytes(), logged)
    tmp_path.mkdir(parents=True, exist_ok=True)
    for name, data in (("etrecord.bin", etrecord), ("etdump.etdp", etdump), ("debug_buffer.bin", buffer)):
        (tmp_path / name).write_bytes(data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Inspector(etdump_path=str(tmp_path / "etdump.etdp"), etrecord=str(tmp_path / "etrecord.bin"),
                         debug_buffer_path=str(tmp_path / "debug_buffer.bin"))


def _original(fixture: Path) -> Inspector:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Inspector(etdump_path=str(fixture / "etdump.etdp"), etrecord=str(fixture / "etrecord.bin"),
                         debug_buffer_path=str(fixture / "debug_buffer.bin"))


def test_the_reference_answer_on_a_delegate_with_scratch(tmp_path: Path) -> None:
    """xnnpack fixture edited to the upstream format: the gap is the reference's on the unedited files."""
    inspector = _edited(tmp_path, FIXTURES / "xnnpack", [[48, 16]], [[48, 16]])
    call = next(e for b in inspector.event_blocks for e in b.events if e.name == "DELEGATE_CALL")
    assert [tuple(v.shape) for v in call.debug_data] == [(1, 3, 8, 8), (1, 10), (48,), (16,)]  # the edit is there
    assert call.debug_data[-1].dtype == torch.uint8
    for key, expected in load_expected("xnnpack")["gap"].items():
        metric = key.rsplit("/", 1)[1]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            df = inspector.calculate_numeric_gap(metric)
        assert list(df.columns) == expected["columns"] and len(df) == len(expected["rows"]) == 1
        row, exp = df.iloc[0], expected["rows"][0]
        assert list(row["runtime_debug_handle"]) == exp["runtime_debug_handle"]
        assert tuple(row["runtime_intermediate_output"].shape) == tuple(exp["runtime_intermediate_output"]["shape"])
        assert same_gap(metric, list(row["gap"]), list(exp["gap"]), row["aot_intermediate_output"])
    notes = inspector.numeric_gap_report("MSE").notes
    assert "dropped 2 scratch value(s) logged after the outputs of 1 delegate call(s)" in " ".join(notes)


def test_multi_output_delegates_pair_as_without_scratch(tmp_path: Path) -> None:
    """real_llama_xnn (14 delegate calls, most with 2-3 outputs) edited to the upstream format.

    Every lowered module declares the same scratch, so numdiff needs no handle to tell them apart.
    Without ``scratch_specs`` the same dump pairs scratch bytes as outputs (the control).
    """
    want = [str(row.gap) for row in _original(LLAMA).numeric_gap_report("MSE").table.rows]
    report = _edited(tmp_path / "a", LLAMA, [[32]] * LLAMA_CALLS, [[32]] * LLAMA_CALLS).numeric_gap_report("MSE")
    assert [str(row.gap) for row in report.table.rows] == want
    assert f"dropped {LLAMA_CALLS} scratch value(s)" in " ".join(report.notes)
    control = _edited(tmp_path / "b", LLAMA, [[]] * LLAMA_CALLS, [[32]] * LLAMA_CALLS).numeric_gap_report("MSE")
    assert [str(row.gap) for row in control.table.rows] != want


def test_calls_that_cannot_be_told_apart_are_refused(tmp_path: Path) -> None:
    """Lowered modules without original programs and different scratch: which call ran which is unknown."""
    inspector = _edited(tmp_path, LLAMA, [[32]] * (LLAMA_CALLS - 1) + [[16]], [[32]] * LLAMA_CALLS)
    with pytest.raises(MissingDataError, match=r"(?s)matches no lowered module.*sizes in bytes: \(16,\), \(32,\).*"
                                               r"does not guess\nRecord the ETRecord with the lowered program"):
        inspector.numeric_gap_report("MSE")


def test_logged_values_that_are_not_the_declared_scratch_are_refused(tmp_path: Path) -> None:
    inspector = _edited(tmp_path, FIXTURES / "xnnpack", [[48, 16]], [[48, 8]])
    with pytest.raises(MismatchedArtifactsError, match=r"logged value 3 is torch.uint8 \(8,\), where its lowered "
                                                       r"module declares a scratch buffer of 16 bytes.*\nPass the "
                                                       r"ETRecord and ETDump of the same export"):
        inspector.calculate_numeric_gap("MSE")


def test_malformed_scratch_specs_name_the_entry(tmp_path: Path) -> None:
    inspector = _edited(tmp_path, FIXTURES / "xnnpack", [[0]], [[48]])
    with pytest.raises(ETRecordError, match=r"entry 'lowered/forward': .*scratch_specs\[0\] has nbytes 0, "
                                            r"not a positive integer"):
        inspector.calculate_numeric_gap("MSE")


def _call(handle: tuple[int, ...], values: list[torch.Tensor], outputs: int = 1) -> RuntimeOutput:
    return RuntimeOutput(handle, 5, "DELEGATE_CALL", values, outputs)


def test_drop_scratch_tells_calls_apart_by_their_original_handles() -> None:
    out = torch.ones(2)
    calls = {(1, 2): _call((1, 2), [out, out, torch.zeros(4, dtype=torch.uint8)]),
             (3,): _call((3,), [out, out]),
             (9,): RuntimeOutput((9,), 6, "native_call_add.out", [out])}
    parts = [PartitionScratch("A", frozenset({1, 2}), (4,)), PartitionScratch("B", frozenset({3}), ())]
    kept, notes = drop_scratch(calls, parts)
    assert [len(kept[h].data) for h in calls] == [2, 2, 1]
    assert kept[(3,)] is calls[(3,)] and kept[(9,)] is calls[(9,)]
    assert notes == ("dropped 1 scratch value(s) logged after the outputs of 1 delegate call(s) "
                     "(scratch_specs of their lowered modules)",)


def test_drop_scratch_changes_nothing_without_scratch() -> None:
    calls: dict[tuple[int, ...], RuntimeOutput] = {(1,): _call((1,), [torch.ones(1), torch.ones(1)])}
    assert drop_scratch(calls, [PartitionScratch("A", frozenset(), ())]) == (calls, ())


def test_too_few_logged_values_are_refused() -> None:
    calls: dict[tuple[int, ...], RuntimeOutput] = {(1,): _call((1,), [torch.zeros(4, dtype=torch.uint8)], outputs=1)}
    with pytest.raises(MismatchedArtifactsError, match=r"logged 1 values, fewer than its 1 output\(s\) and the 1 "
                                                       r"scratch buffer\(s\)"):
        drop_scratch(calls, [PartitionScratch("A", frozenset({1}), (4,))])


def _lowered_graph_output(tmp_path: Path, declared: list[int], passed: list[int]) -> tuple[object, object]:
    from numdiff.schema.etrecord import parse_etrecord

    data = with_lowered_program((FIXTURES / "xnnpack" / "etrecord.bin").read_bytes(), [declared], scratch_args=passed)
    record = parse_etrecord(data)
    inputs = record._representative_inputs[0]  # type: ignore[index]
    lowered = record.graph_map["lowered/forward"]  # type: ignore[index]
    with torch.no_grad():
        return lowered.module()(*inputs), record.exported_program.module()(*inputs)  # type: ignore[union-attr]


def test_a_program_after_to_executorch_runs_its_delegate_without_the_scratch_arguments(tmp_path: Path) -> None:
    """The lowered program as recorded after to_executorch: memory.alloc scratch buffers follow the call's inputs."""
    got, want = _lowered_graph_output(tmp_path, [48, 16], [48, 16])
    torch.testing.assert_close(got, want)


def test_a_delegate_called_with_arguments_its_scratch_does_not_explain_is_refused(tmp_path: Path) -> None:
    from numdiff.errors import CaptureError

    with pytest.raises(CaptureError, match=r"called with 3 arguments; its original program takes 1 and its lowered "
                                           r"module declares 1 scratch buffer\(s\)"):
        _lowered_graph_output(tmp_path, [48], [48, 16])
