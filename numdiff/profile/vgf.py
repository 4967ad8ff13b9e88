"""Arm VGF neural-accelerator statistics carried as JSON in delegate debug metadata.

The VGF backend writes, as the delegate debug metadata of its profiling events, a JSON object
``{"schema": "executorch.vgf.neural_statistics", "schema_version": 1, ..., "segments": [...]}``.
Each segment may hold three blobs (``debug_database``, ``statistics_info``,
``statistics_memory``), each ``{"available": bool, "encoding": "base64", "data": "..."}``. The
parsers below check the schema and version, decode every available blob into ``raw_data``
(bytes; ``b""`` when the blob is not available) and return plain dicts, as ExecuTorch 1.5.1's
``executorch.devtools.inspector`` functions of the same names do.

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
from typing import Any, Union

from numdiff.errors import DelegateMetadataError, UsageTypeError
from numdiff._core.safe_json import TooDeepError, loads_checked
from numdiff._core.types import JSON

__all__ = [
    "BLOB_KEYS",
    "SCHEMA",
    "SCHEMA_VERSION",
    "DelegateMetadataBytes",
    "neural_statistics_of_events",
    "parse_vgf_neural_statistics_delegate_metadata",
    "parse_vgf_neural_statistics_metadata",
]

#: The ``schema`` value that marks a VGF statistics record.
SCHEMA = "executorch.vgf.neural_statistics"
#: The only ``schema_version`` understood.
SCHEMA_VERSION = 1
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
            "Only base64-encoded blobs are defined by schema version 1.")
    data = out.get("data", "")
    try:
        out["raw_data"] = base64.b64decode(data, validate=True)
    except (binascii.Error, TypeError, ValueError) as e:
        raise DelegateMetadataError(f"Malformed base64 data in VGF neural statistics blob ({where})\n{_HINT}") from e
    return out


def parse_vgf_neural_statistics_metadata(metadata: DelegateMetadataBytes) -> dict[str, Any]:
    """Parse one VGF statistics record; every available blob gains ``raw_data`` (bytes).

    Args:
        metadata: One delegate metadata entry (bytes, bytearray or UTF-8 str).

    Returns:
        The record as a dict (a copy; segments and blobs copied too).

    Raises:
        UsageTypeError: ``metadata`` is not bytes, bytearray or str (also a ``TypeError``).
        DelegateMetadataError: Not JSON, not a VGF statistics record ("Not VGF neural statistics
            metadata"), another schema version, an unknown blob encoding or bad base64 (also a
            ``ValueError``).
    """
    payload = _load(_as_bytes(metadata), "VGF neural statistics metadata is not valid JSON")
    if not isinstance(payload, dict) or payload.get("schema") != SCHEMA:
        schema = payload.get("schema") if isinstance(payload, dict) else None
        raise DelegateMetadataError(f"Not VGF neural statistics metadata: {schema}\n"
                                    f"A VGF statistics record is a JSON object with \"schema\": {SCHEMA!r}.")
    version = payload.get("schema_version")
    if version != SCHEMA_VERSION:
        raise DelegateMetadataError(
            f"Unsupported VGF neural statistics metadata schema version: {version}\n"
            f"This numdiff reads version {SCHEMA_VERSION}; a newer numdiff may read it.")
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
