"""A tiny zip reader/writer that can write what zipfile refuses to: any method, any size, duplicate names.

Used by the ETRecord mutators. ``read_entries`` lists (name bytes, method, data as stored);
``write_zip`` writes them back, optionally with lying header fields. ``deflate_bomb`` streams a
highly compressible entry without ever holding it inflated.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, replace

__all__ = ["Entry", "deflate_bomb", "read_entries", "write_zip"]

_LOCAL = b"PK\x03\x04"
_CENTRAL = b"PK\x01\x02"
_EOCD = b"PK\x05\x06"


@dataclass(frozen=True)
class Entry:
    """One member as stored: ``data`` is the stored (possibly compressed) bytes."""

    name: bytes
    data: bytes
    method: int = 0
    crc: int | None = None  # None: computed from data (only right for stored entries)
    size: int | None = None  # uncompressed size; None: len(data)
    flags: int = 0
    extra: bytes = b""

    def with_(self, **changes: object) -> Entry:
        return replace(self, **changes)  # type: ignore[arg-type]


def read_entries(data: bytes) -> list[Entry]:
    """Members of a well-formed zip (the seeds), in central-directory order."""
    end = data.rfind(_EOCD)
    if end < 0:
        raise ValueError("no end of central directory")
    count, cd_size, cd_off = struct.unpack_from("<HII", data, end + 10)
    out: list[Entry] = []
    pos = cd_off
    for _ in range(count):
        (_sig, _v1, _v2, flags, method, _t, _d, crc, csize, usize, nlen, xlen, clen, _disk, _ia, _ea,
         local) = struct.unpack_from("<4sHHHHHHIIIHHHHHII", data, pos)
        name = data[pos + 46: pos + 46 + nlen]
        pos += 46 + nlen + xlen + clen
        lnlen, lxlen = struct.unpack_from("<HH", data, local + 26)
        start = local + 30 + lnlen + lxlen
        out.append(Entry(name, data[start: start + csize], method, crc, usize, flags))
    return out


def write_zip(entries: list[Entry], *, local_overrides: dict[int, dict[str, int]] | None = None,
              central_overrides: dict[int, dict[str, int]] | None = None,
              eocd_overrides: dict[str, int] | None = None) -> bytes:
    """Write ``entries``; the overrides replace header fields (keys: method, crc, csize, usize, offset,
    flags, nlen, xlen; EOCD: count, cd_size, cd_offset, clen) for the entry at that index."""
    local_overrides = local_overrides or {}
    central_overrides = central_overrides or {}
    out = bytearray()
    offsets: list[int] = []
    fields: list[dict[str, int]] = []
    for i, e in enumerate(entries):
        crc = zlib.crc32(e.data) & 0xFFFFFFFF if e.crc is None else e.crc
        f = {"method": e.method, "crc": crc, "csize": len(e.data),
             "usize": len(e.data) if e.size is None else e.size, "flags": e.flags,
             "nlen": len(e.name), "xlen": len(e.extra), "offset": len(out)}
        fields.append(f)
        lf = {**f, **local_overrides.get(i, {})}
        offsets.append(len(out))
        out += struct.pack("<4sHHHHHIIIHH", _LOCAL, 20, lf["flags"] & 0xFFFF, lf["method"] & 0xFFFF, 0, 0x21,
                           lf["crc"] & 0xFFFFFFFF, lf["csize"] & 0xFFFFFFFF, lf["usize"] & 0xFFFFFFFF,
                           lf["nlen"] & 0xFFFF, lf["xlen"] & 0xFFFF)
        out += e.name + e.extra + e.data
    cd_start = len(out)
    for i, e in enumerate(entries):
        cf = {**fields[i], **central_overrides.get(i, {})}
        out += struct.pack("<4sHHHHHHIIIHHHHHII", _CENTRAL, 20, 20, cf["flags"] & 0xFFFF, cf["method"] & 0xFFFF,
                           0, 0x21, cf["crc"] & 0xFFFFFFFF, cf["csize"] & 0xFFFFFFFF, cf["usize"] & 0xFFFFFFFF,
                           cf["nlen"] & 0xFFFF, cf["xlen"] & 0xFFFF, 0, 0, 0, 0, cf["offset"] & 0xFFFFFFFF)
        out += e.name + e.extra
    eo = {"count": len(entries), "cd_size": len(out) - cd_start, "cd_offset": cd_start, "clen": 0,
          **(eocd_overrides or {})}
    out += struct.pack("<4sHHHHIIH", _EOCD, 0, 0, eo["count"] & 0xFFFF, eo["count"] & 0xFFFF,
                       eo["cd_size"] & 0xFFFFFFFF, eo["cd_offset"] & 0xFFFFFFFF, eo["clen"] & 0xFFFF)
    return bytes(out)


_BOMBS: dict[int, tuple[bytes, int]] = {}


def deflate_bomb(inflated: int, fill: bytes = b" ") -> tuple[bytes, int]:
    """Raw deflate stream of ``inflated`` copies of ``fill`` (cached), and its CRC-32."""
    if inflated not in _BOMBS:
        comp = zlib.compressobj(9, zlib.DEFLATED, -15)
        chunk = fill * (1 << 20)
        parts, crc, left = [], 0, inflated
        while left > 0:
            piece = chunk[: min(left, len(chunk))]
            crc = zlib.crc32(piece, crc)
            parts.append(comp.compress(piece))
            left -= len(piece)
        parts.append(comp.flush())
        _BOMBS[inflated] = (b"".join(parts), crc & 0xFFFFFFFF)
    return _BOMBS[inflated]
