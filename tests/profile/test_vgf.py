"""Arm VGF neural statistics in delegate metadata: parsing, errors, and the Inspector method."""

from __future__ import annotations

import base64
import json
import warnings
from typing import Any

import pytest

from numdiff import Inspector, NumdiffError
from numdiff.errors import DelegateMetadataError, UsageTypeError
from numdiff.inspector import parse_vgf_neural_statistics_delegate_metadata, parse_vgf_neural_statistics_metadata
from numdiff.profile.vgf import SCHEMA, SCHEMA_VERSION
from numdiff.schema.etdump import ETDumpDoc, Event, ProfileEvent, RunDoc
from numdiff.schema.etdump.writer import write_etdump


def _blob(data: bytes | None) -> dict[str, Any]:
    return {"available": data is not None, "encoding": "base64", "size": len(data or b""),
            "data": base64.b64encode(data).decode() if data is not None else ""}


def _record(available: bool = True, **changes: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "schema": SCHEMA, "schema_version": SCHEMA_VERSION, "backend": "VgfBackend", "available": available,
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
        (_record(schema_version=2), "Unsupported VGF neural statistics metadata schema version: 2"),
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
