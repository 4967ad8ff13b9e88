"""Arm VGF neural-accelerator statistics carried as JSON in delegate debug metadata.

The VGF backend writes, as the delegate debug metadata of its profiling events, a JSON object
``{"schema": "executorch.vgf.neural_statistics", "schema_version": 1 or 2, ..., "segments": [...]}``.
Each segment may hold three blobs (``debug_database``, ``statistics_info``,
``statistics_memory``), each ``{"available": bool, "encoding": "base64", "data": "..."}``. The
parsers below check the schema and version, decode every available blob into ``raw_data``
(bytes; ``b""`` when the blob is not available) and return plain dicts, as ExecuTorch's
``executorch.devtools.inspector`` functions of the same names do.

Version 2 (ExecuTorch's Arm backend after 1.5: ``backends/arm/runtime/VGFNeuralStatistics.cpp``
and ``devtools/inspector/vgf_neural_statistics.py`` upstream) adds three objects that say how to
read ``statistics_memory``: ``statistics_mode`` (``executorch_index``, ``vulkan_value``,
``vulkan_name``), ``target`` (``available``, ``device_name``, ``vendor_id``, ``device_id``,
``driver_version``: the Vulkan physical device) and ``counter_layout`` (``available``,
``schema_id``, ``schema_version``, ``endianness``, ``word_type``, ``words_per_task``,
``leading_block_count``, ``reason``). A version-2 record missing any of them is refused, as
upstream refuses it. :func:`summarize` gives the device, driver, mode and layout of a parsed
record (version 1 records have none of them, and the summary says so). numdiff does not decode
``statistics_memory`` into counters: no public source names the counters of a layout.

The metadata comes from the ETDump, so it is untrusted: it is only ever parsed as JSON (nesting
depth checked first), never evaluated. Malformed records that claim the VGF schema raise
``DelegateMetadataError`` (also a ``ValueError``, as the reference raises), naming what is wrong.

Example:
    >>> import base64, json
    >>> record = {"schema": SCHEMA, "schema_version": 1, "segments": [
    ...     {"statistics_memory": {"available": True, "encoding": "base64",
    ...                            "data": base64.b64encode(b"\\xde\\xad").decode()}}]}
    >>> parse_vgf_neural_statistics_metadata(json.dumps(record))["segments"][0]["statistics_memory"]["raw_data"]
    b'\\xde\\xad'
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Union

from numdiff.errors import DelegateMetadataError, UsageTypeError
from numdiff._core.safe_json import TooDeepError, loads_checked
from numdiff._core.types import JSON

__all__ = [
    "BLOB_KEYS",
    "SCHEMA",
    "SCHEMA_VERSION",
    "SCHEMA_VERSIONS",
    "V2_SECTIONS",
    "DelegateMetadataBytes",
    "VgfStatisticsSummary",
    "neural_statistics_of_events",
    "parse_vgf_neural_statistics_delegate_metadata",
    "parse_vgf_neural_statistics_metadata",
    "summarize",
]

#: The ``schema`` value that marks a VGF statistics record.
SCHEMA = "executorch.vgf.neural_statistics"
#: The newest ``schema_version`` understood.
SCHEMA_VERSION = 2
#: Every ``schema_version`` understood.
SCHEMA_VERSIONS = (1, 2)
#: The objects a version-2 record must carry, with the keys each must have (as upstream checks).
V2_SECTIONS: dict[str, tuple[str, ...]] = {
    "statistics_mode": ("executorch_index", "vulkan_value", "vulkan_name"),
    "target": ("available", "device_name", "vendor_id", "device_id", "driver_version"),
    "counter_layout": ("available", "schema_id", "schema_version", "endianness", "word_type", "words_per_task",
                       "leading_block_count", "reason"),
}
#: The blob fields of a segment that carry base64 data.
BLOB_KEYS = ("debug_database", "statistics_info", "statistics_memory")

DelegateMetadataBytes = Union[bytes, bytearray, str]

_HINT = "The record comes from the VGF backend's delegate metadata in the ETDump; check the backend's version."


def _as_bytes(metadata: object) -> bytes:
    if isinstance(metadata, (bytes, bytearray)):
        return bytes(metadata)
    if isinstance(metadata, str):
        return metadata.encode("utf-8")
    raise UsageTypeError(f"Unsupported delegate metadata type: {type(metadata)}\n"
                         "Pass the metadata as bytes, bytearray or str.")


def _load(data: bytes, what: str) -> JSON:
    try:
        return loads_checked(data)
    except TooDeepError as e:
        raise DelegateMetadataError(f"{what}: {e}\n{e.hint}") from e
    except ValueError as e:  # not UTF-8 or not JSON
        raise DelegateMetadataError(f"{what}: {type(e).__name__}: {e}\n{_HINT}") from e


def _decoded_blob(blob: dict[str, Any], where: str) -> dict[str, Any]:
    out = dict(blob)
    if not out.get("available", False):
        out.setdefault("raw_data", b"")
        return out
    if out.get("encoding") != "base64":
        raise DelegateMetadataError(
            f"Unsupported VGF neural statistics blob encoding: {out.get('encoding')} ({where})\n"
            "Only base64-encoded blobs are defined by schema versions 1 and 2.")
    data = out.get("data", "")
    try:
        out["raw_data"] = base64.b64decode(data, validate=True)
    except (binascii.Error, TypeError, ValueError) as e:
        raise DelegateMetadataError(f"Malformed base64 data in VGF neural statistics blob ({where})\n{_HINT}") from e
    return out


def _check_v2(payload: dict[str, Any]) -> None:
    """Refuse a version-2 record without the objects that say how to read its statistics."""
    for section, keys in V2_SECTIONS.items():
        value = payload.get(section)
        if not isinstance(value, dict):
            raise DelegateMetadataError(
                f"VGF neural statistics metadata (schema version 2) is missing {section!r}\n"
                f"Version 2 records carry {', '.join(V2_SECTIONS)} objects; {_HINT}")
        missing = [key for key in keys if key not in value]
        if missing:
            raise DelegateMetadataError(
                f"VGF neural statistics metadata (schema version 2) {section!r} is missing: {', '.join(missing)}\n"
                f"{_HINT}")


def parse_vgf_neural_statistics_metadata(metadata: DelegateMetadataBytes) -> dict[str, Any]:
    """Parse one VGF statistics record; every available blob gains ``raw_data`` (bytes).

    Args:
        metadata: One delegate metadata entry (bytes, bytearray or UTF-8 str).

    Returns:
        The record as a dict (a copy; segments and blobs copied too).

    Raises:
        UsageTypeError: ``metadata`` is not bytes, bytearray or str (also a ``TypeError``).
        DelegateMetadataError: Not JSON, not a VGF statistics record ("Not VGF neural statistics
            metadata"), a schema version other than 1 and 2, a version-2 record without its
            ``statistics_mode``/``target``/``counter_layout`` objects or keys, an unknown blob
            encoding or bad base64 (also a ``ValueError``).
    """
    payload = _load(_as_bytes(metadata), "VGF neural statistics metadata is not valid JSON")
    if not isinstance(payload, dict) or payload.get("schema") != SCHEMA:
        schema = payload.get("schema") if isinstance(payload, dict) else None
        raise DelegateMetadataError(f"Not VGF neural statistics metadata: {schema}\n"
                                    f"A VGF statistics record is a JSON object with \"schema\": {SCHEMA!r}.")
    version = payload.get("schema_version")
    if isinstance(version, bool) or version not in SCHEMA_VERSIONS:
        raise DelegateMetadataError(
            f"Unsupported VGF neural statistics metadata schema version: {version}\n"
            f"This numdiff reads versions {', '.join(map(str, SCHEMA_VERSIONS))}; a newer numdiff may read it.")
    if version == 2:
        _check_v2(payload)
    out: dict[str, Any] = dict(payload)
    segments = out.get("segments", [])
    if not isinstance(segments, list):
        raise DelegateMetadataError(f"VGF neural statistics \"segments\" is a {type(segments).__name__}, not a list\n"
                                    f"{_HINT}")
    decoded = []
    for index, segment in enumerate(segments):
        seg = dict(segment) if isinstance(segment, dict) else segment
        if isinstance(seg, dict):
            for key in BLOB_KEYS:
                if isinstance(seg.get(key), dict):
                    seg[key] = _decoded_blob(seg[key], f"segment {index}, {key}")
        decoded.append(seg)
    out["segments"] = decoded
    return out


def parse_vgf_neural_statistics_delegate_metadata(
    delegate_metadata_list: Sequence[DelegateMetadataBytes | None],
) -> list[dict[str, Any]]:
    """The VGF statistics records among one event's delegate metadata entries.

    Entries from other backends (empty, not JSON, another ``schema``, not bytes/str) are skipped.
    An entry that mentions the VGF schema but is not valid JSON, or that claims the schema and
    is malformed, raises instead of being dropped.

    Raises:
        DelegateMetadataError: "Malformed VGF neural statistics delegate metadata", or any error
            of :func:`parse_vgf_neural_statistics_metadata` (also a ``ValueError``).
    """
    records = []
    for metadata in delegate_metadata_list:
        if metadata is None or not isinstance(metadata, (bytes, bytearray, str)) or len(metadata) == 0:
            continue
        data = _as_bytes(metadata)
        try:
            payload = loads_checked(data)
        except TooDeepError as e:
            if SCHEMA.encode() in data:
                raise DelegateMetadataError(f"Malformed VGF neural statistics delegate metadata: {e}\n{e.hint}") from e
            continue
        except ValueError as e:  # not UTF-8 or not JSON: another backend's metadata unless it names the schema
            if SCHEMA.encode() in data:
                raise DelegateMetadataError(
                    f"Malformed VGF neural statistics delegate metadata: {type(e).__name__}: {e}\n{_HINT}") from e
            continue
        if isinstance(payload, dict) and payload.get("schema") == SCHEMA:
            records.append(parse_vgf_neural_statistics_metadata(data))
    return records


def neural_statistics_of_events(events: Iterable[Any]) -> list[dict[str, Any]]:
    """Every VGF statistics record in the raw delegate metadata of ``events``, in event order."""
    out: list[dict[str, Any]] = []
    for event in events:
        out.extend(parse_vgf_neural_statistics_delegate_metadata(event.raw_delegate_debug_metadatas))
    return out


@dataclass(frozen=True, slots=True)
class VgfStatisticsSummary:
    """What one parsed VGF statistics record says about where and how it was collected.

    Attributes:
        schema_version: 1 or 2.
        data_available: Whether the driver gave statistics (``data_available``, else ``available``).
        reason: Why not, as the backend wrote it ("" when it gave them).
        segments: Number of segments in the record.
        device_name: The Vulkan device (version 2 with ``target.available``), else None.
        vendor_id: Its PCI vendor id (``0x13b5`` is Arm), else None.
        device_id: Its device id, else None.
        driver_version: The driver version as Vulkan reports it (a vendor-encoded integer), else None.
        mode: The statistics mode's Vulkan name (version 2), else None.
        mode_index: The mode as ExecuTorch numbers it (0 or 1; version 2), else None.
        counter_layout: ``schema_id`` of the counter layout when the backend registered one, else None.
        counter_layout_reason: Why there is no layout (version 2 without one), else None.
    """

    schema_version: int
    data_available: bool
    reason: str
    segments: int
    device_name: str | None = None
    vendor_id: int | None = None
    device_id: int | None = None
    driver_version: int | None = None
    mode: str | None = None
    mode_index: int | None = None
    counter_layout: str | None = None
    counter_layout_reason: str | None = None

    def describe(self) -> str:
        """One line for a terminal (text from the file is escaped).

        Example:
            >>> VgfStatisticsSummary(1, True, "", 2).describe()
            'VGF neural statistics v1: 2 segment(s), data available; device and driver not recorded (version 1)'
        """
        from numdiff._core.terminal import printable

        data = "data available" if self.data_available else f"no data ({printable(self.reason, newlines=False)})"
        head = f"VGF neural statistics v{self.schema_version}: {self.segments} segment(s), {data}"
        if self.schema_version < 2:
            return head + "; device and driver not recorded (version 1)"
        if self.device_name is None:
            device = "device and driver not known to the backend"
        else:
            device = (f"device '{printable(self.device_name, newlines=False)}' (vendor {_hex(self.vendor_id)}, "
                      f"device {_hex(self.device_id)}), driver {self.driver_version} ({_hex(self.driver_version)})")
        mode = f"mode {printable(str(self.mode), newlines=False)} (ExecuTorch index {self.mode_index})"
        layout = (f"counter layout {printable(self.counter_layout, newlines=False)}" if self.counter_layout
                  else f"no counter layout ({printable(self.counter_layout_reason or '', newlines=False)})")
        return f"{head}; {device}; {mode}; {layout}"


def _hex(value: int | None) -> str:
    return "?" if value is None else f"{value:#x}"


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _section(record: dict[str, Any], key: str) -> dict[str, Any]:
    value = record.get(key)
    return value if isinstance(value, dict) else {}


def summarize(record: dict[str, Any]) -> VgfStatisticsSummary:
    """The device, driver, mode and counter layout of a record parsed by this module.

    Fields the record lacks or gives with the wrong type are None (the parser already refused a
    version-2 record without them).

    Example:
        >>> record = {"schema_version": 2, "data_available": True, "reason": "", "segments": [{}],
        ...           "statistics_mode": {"executorch_index": 1, "vulkan_value": 2, "vulkan_name": "STATISTICS1"},
        ...           "target": {"available": True, "device_name": "Mali-G2", "vendor_id": 5045,
        ...                      "device_id": 7, "driver_version": 11},
        ...           "counter_layout": {"available": False, "schema_id": "", "reason": "none registered"}}
        >>> s = summarize(record)
        >>> (s.device_name, hex(s.vendor_id or 0), s.driver_version, s.mode, s.counter_layout)
        ('Mali-G2', '0x13b5', 11, 'STATISTICS1', None)
    """
    version = _int_or_none(record.get("schema_version")) or 1
    segments = record.get("segments")
    available = record.get("data_available", record.get("available", False))
    summary = VgfStatisticsSummary(
        schema_version=version,
        data_available=available is True,
        reason=str(record.get("reason") or ""),
        segments=len(segments) if isinstance(segments, list) else 0,
    )
    if version < 2:
        return summary
    mode, target, layout = (_section(record, key) for key in V2_SECTIONS)
    known = target.get("available") is True and isinstance(target.get("device_name"), str)
    has_layout = layout.get("available") is True and isinstance(layout.get("schema_id"), str) and layout["schema_id"]
    return replace(
        summary,
        device_name=target["device_name"] if known else None,
        vendor_id=_int_or_none(target.get("vendor_id")) if known else None,
        device_id=_int_or_none(target.get("device_id")) if known else None,
        driver_version=_int_or_none(target.get("driver_version")) if known else None,
        mode=mode["vulkan_name"] if isinstance(mode.get("vulkan_name"), str) else None,
        mode_index=_int_or_none(mode.get("executorch_index")),
        counter_layout=layout["schema_id"] if has_layout else None,
        counter_layout_reason=None if has_layout else str(layout.get("reason") or ""),
    )
