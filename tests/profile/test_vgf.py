"""Arm VGF neural statistics in delegate metadata: parsing, errors, and the Inspector method."""

from __future__ import annotations

import base64
import json
import warnings
from typing import Any

from pathlib import Path

import pytest

from numdiff import Inspector, NumdiffError
from numdiff.errors import DelegateMetadataError, UsageTypeError
from numdiff.inspector import parse_vgf_neural_statistics_delegate_metadata, parse_vgf_neural_statistics_metadata
from numdiff.profile.vgf import SCHEMA, SCHEMA_VERSION, SCHEMA_VERSIONS, summarize
from numdiff.schema.etdump import ETDumpDoc, Event, ProfileEvent, RunDoc
from numdiff.schema.etdump.writer import write_etdump
from tests.conftest import FIXTURES
from tests.upstream_formats import vgf_record, with_vgf_events


def _blob(data: bytes | None) -> dict[str, Any]:
    return {"available": data is not None, "encoding": "base64", "size": len(data or b""),
            "data": base64.b64encode(data).decode() if data is not None else ""}


def _record(available: bool = True, **changes: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "schema": SCHEMA, "schema_version": 1, "backend": "VgfBackend", "available": available,
        "data_available": available, "reason": "" if available else "Statistics data unavailable",
        "segments": [{
            "segment_id": 0,
            "debug_database": _blob(b"\x01\x02\x03" if available else None),
            "statistics_info": _blob(b"info" if available else None),
            "statistics_memory": _blob(b"\xde\xad" if available else None),
        }],
    }
    record.update(changes)
    return record


def _bytes(record: dict[str, Any]) -> bytes:
    return json.dumps(record).encode()


def test_blobs_are_decoded_and_the_rest_kept() -> None:
    for metadata in (_bytes(_record()), bytearray(_bytes(_record())), _bytes(_record()).decode()):
        parsed = parse_vgf_neural_statistics_metadata(metadata)
        segment = parsed["segments"][0]
        assert segment["debug_database"]["raw_data"] == b"\x01\x02\x03"
        assert segment["statistics_info"]["raw_data"] == b"info"
        assert segment["statistics_memory"]["raw_data"] == b"\xde\xad"
        assert segment["statistics_memory"]["data"] == base64.b64encode(b"\xde\xad").decode()
        assert parsed["backend"] == "VgfBackend" and parsed["schema_version"] == 1


def test_unavailable_blobs_get_empty_raw_data() -> None:
    parsed = parse_vgf_neural_statistics_metadata(_bytes(_record(available=False)))
    assert parsed["reason"] == "Statistics data unavailable"
    assert all(parsed["segments"][0][k]["raw_data"] == b"" for k in ("debug_database", "statistics_info"))


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (_record(schema_version=3), "Unsupported VGF neural statistics metadata schema version: 3"),
        (_record(schema_version=True), "Unsupported VGF neural statistics metadata schema version: True"),
        (_record(schema_version=2), r"\(schema version 2\) is missing 'statistics_mode'"),
        (_record(schema="other.backend"), "Not VGF neural statistics metadata: other.backend"),
        ({**_record(), "segments": [{"statistics_info": {**_blob(b"x"), "data": "not-valid-base64!"}}]},
         "Malformed base64 data in VGF neural statistics blob \\(segment 0, statistics_info\\)"),
        ({**_record(), "segments": [{"statistics_info": {**_blob(b"x"), "encoding": "hex"}}]},
         "Unsupported VGF neural statistics blob encoding: hex"),
        ({**_record(), "segments": "oops"}, "\"segments\" is a str, not a list"),
    ],
)
def test_bad_records_raise_a_value_error_that_is_a_numdiff_error(record: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        parse_vgf_neural_statistics_metadata(_bytes(record))
    assert isinstance(info.value, DelegateMetadataError) and isinstance(info.value, NumdiffError)


def test_wrong_type_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="Unsupported delegate metadata type") as info:
        parse_vgf_neural_statistics_metadata(12)  # type: ignore[arg-type]
    assert isinstance(info.value, UsageTypeError)


def test_other_backends_metadata_is_skipped() -> None:
    parsed = parse_vgf_neural_statistics_delegate_metadata(
        [b"", None, 7, b"not json", b"\xff\xfe", b'{"schema":"some.other.backend","schema_version":1}', b"[1, 2]",
         _bytes(_record())])  # type: ignore[list-item]
    assert [p["schema"] for p in parsed] == [SCHEMA]


def test_malformed_record_naming_the_schema_is_not_dropped() -> None:
    with pytest.raises(ValueError, match="Malformed VGF neural statistics delegate metadata"):
        parse_vgf_neural_statistics_delegate_metadata([b'{"schema":"executorch.vgf.neural_statistics","schema_version":1'])


def test_deeply_nested_metadata_is_refused_without_recursion() -> None:
    bomb = b'{"schema":"executorch.vgf.neural_statistics","x":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    with pytest.raises(DelegateMetadataError, match="nested at least"):
        parse_vgf_neural_statistics_delegate_metadata([bomb])
    assert parse_vgf_neural_statistics_delegate_metadata([b"[" * 100_000 + b"]" * 100_000]) == []


def test_inspector_reads_records_from_an_etdump() -> None:
    """A dump written by numdiff's ETDump writer, with VGF records as delegate metadata of delegate events."""
    vgf = _bytes(_record())

    def run(meta: bytes) -> RunDoc:
        return RunDoc("Execute", [
            Event(profile_event=ProfileEvent("VGF_NEURAL_STATISTICS", 0, 0, 1, None, meta, 0, 10)),
            Event(profile_event=ProfileEvent("other_delegate_op", 0, 0, 2, None, b"opaque=1", 0, 20)),
            Event(profile_event=ProfileEvent("Method::execute", 0, -1, -1, None, None, 0, 30)),
        ])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        inspector = Inspector(etdump_data=write_etdump(ETDumpDoc(0, [run(vgf), run(vgf)])))
    records = inspector.get_vgf_neural_statistics()
    assert len(records) == 2  # one per run (sample) of the event
    assert records[0]["segments"][0]["statistics_memory"]["raw_data"] == b"\xde\xad"


def test_inspector_method_needs_only_event_blocks() -> None:
    """The reference's own test builds an Inspector with __new__ and sets event_blocks."""
    from numdiff import Event as Ev
    from numdiff import EventBlock

    inspector = Inspector.__new__(Inspector)
    inspector.event_blocks = [EventBlock(name="forward", events=[
        Ev(name="delegate_execute", _delegate_debug_metadatas=[_bytes(_record())], is_delegated_op=True)])]  # type: ignore[list-item]
    assert inspector.get_vgf_neural_statistics()[0]["segments"][0]["statistics_info"]["raw_data"] == b"info"


# ---- schema version 2 (upstream after ExecuTorch 1.5), on a real ETDump edited to carry it ----------

def _real_dump_with(tmp_path: Path, metadata: str) -> Path:
    """The xnnpack fixture's real ETDump with a VGF_NEURAL_STATISTICS event after each DELEGATE_CALL.

    The artifact is edited to the upstream format (tests/upstream_formats.py): the record is laid out
    as the Arm backend's serializer writes it (pytorch/executorch 39a50150, schema_version 2).
    """
    path = tmp_path / "etdump.etdp"
    path.write_bytes(with_vgf_events((FIXTURES / "xnnpack" / "etdump.etdp").read_bytes(), metadata))
    return path


def test_version_2_gives_device_driver_mode_and_layout(tmp_path: Path) -> None:
    assert SCHEMA_VERSION == 2 and SCHEMA_VERSIONS == (1, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        inspector = Inspector(etdump_path=str(_real_dump_with(tmp_path, vgf_record(2))))
    records = inspector.get_vgf_neural_statistics()
    assert len(records) == 2  # the fixture's two runs
    record = records[0]
    assert record["target"]["device_name"] == "Mali-G2-Pro-NX MC1" and record["schema_version"] == 2
    assert record["segments"][0]["statistics_memory"]["raw_data"] == b"\xde\xad"
    summary = summarize(record)
    assert (summary.device_name, summary.vendor_id, summary.device_id, summary.driver_version) == (
        "Mali-G2-Pro-NX MC1", 0x13B5, 7, 11)
    assert summary.mode == "VK_NEURAL_ACCELERATOR_STATISTICS_MODE_STATISTICS1_ARM" and summary.mode_index == 1
    assert summary.counter_layout == "arm.mali-g2.neural-statistics.mode1"
    assert summary.describe() == (
        "VGF neural statistics v2: 1 segment(s), data available; device 'Mali-G2-Pro-NX MC1' (vendor 0x13b5, "
        "device 0x7), driver 11 (0xb); mode VK_NEURAL_ACCELERATOR_STATISTICS_MODE_STATISTICS1_ARM "
        "(ExecuTorch index 1); counter layout arm.mali-g2.neural-statistics.mode1")


def test_version_1_says_device_and_driver_are_not_recorded(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        inspector = Inspector(etdump_path=str(_real_dump_with(tmp_path, vgf_record(1))))
    summary = summarize(inspector.get_vgf_neural_statistics()[0])
    assert summary.schema_version == 1 and summary.device_name is None and summary.driver_version is None
    assert summary.describe().endswith("device and driver not recorded (version 1)")


def test_unknown_target_has_no_counter_layout_and_control_characters_are_escaped() -> None:
    summary = summarize(parse_vgf_neural_statistics_metadata(vgf_record(2, device_name="NPU\x1b[2J", vendor_id=0x10DE)))
    assert summary.counter_layout is None
    assert summary.counter_layout_reason == "No registered neural statistics counter layout for target"
    assert "\x1b" not in summary.describe() and "NPU\\x1b[2J" in summary.describe()


@pytest.mark.parametrize("section", ["statistics_mode", "target", "counter_layout"])
def test_version_2_without_its_sections_is_refused(section: str) -> None:
    record = json.loads(vgf_record(2))
    record[section].pop(next(iter(record[section])))
    with pytest.raises(DelegateMetadataError, match=rf"\(schema version 2\) '{section}' is missing: "):
        parse_vgf_neural_statistics_metadata(json.dumps(record))
    del record[section]
    with pytest.raises(DelegateMetadataError, match=rf"\(schema version 2\) is missing '{section}'\n"
                                                    r"Version 2 records carry statistics_mode, target, counter_layout"):
        parse_vgf_neural_statistics_metadata(json.dumps(record))


def test_profile_command_prints_device_and_driver(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from numdiff.cli import main

    dump = _real_dump_with(tmp_path, vgf_record(2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["profile", "--etdump", str(dump)]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("VGF neural statistics")]
    assert len(lines) == 2 and "device 'Mali-G2-Pro-NX MC1'" in lines[0] and "driver 11 (0xb)" in lines[0]


def test_profile_command_reports_a_malformed_record_and_still_profiles(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from numdiff.cli import main

    record = json.loads(vgf_record(2))
    del record["target"]
    dump = _real_dump_with(tmp_path, json.dumps(record))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["profile", "--etdump", str(dump)]) == 0
    out = capsys.readouterr()
    assert "DELEGATE_CALL" in out.out
    assert "VGF neural statistics not read: VGF neural statistics metadata (schema version 2) is missing 'target'" in out.err
