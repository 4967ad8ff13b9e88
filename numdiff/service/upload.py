"""Streaming ``multipart/form-data``: each file part goes chunk by chunk into the store's temporaries.

Nothing is held in memory beyond one chunk: file parts are written to the store's temporary
files as they arrive (:class:`numdiff.service.store.BlobWriter`) and hashed. Nothing is committed
while parsing: the route validates the whole form first, then :meth:`Form.commit` makes the files
blobs under their SHA-256 (or :meth:`Form.abort` removes them), so a rejected form leaves nothing
in the store. A part larger than the limit aborts the upload (the temporary files are removed;
the API answers 413). File names sent by the client are ignored except as a label: they never
become paths.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from python_multipart.multipart import MultipartParser, parse_options_header

from numdiff.errors import InputError
from numdiff.service.store import BlobWriter, Store

__all__ = ["BadForm", "Form", "parse_form"]

_MAX_FIELD = 64 * 1024  # bytes of one non-file field
_MAX_PARTS = 32


class BadForm(InputError):
    """The body is not the multipart form the endpoint expects (the API answers 422)."""


@dataclass
class Form:
    """A parsed form: its text fields, and its file parts written but not yet committed to the store."""

    fields: dict[str, list[str]] = field(default_factory=dict)
    files: dict[str, BlobWriter] = field(default_factory=dict)  # field name -> its finished, uncommitted file
    sizes: dict[str, int] = field(default_factory=dict)

    def commit(self) -> dict[str, str]:
        """Make every file part a blob; their hashes by field name (on an error, the rest is removed)."""
        digests: dict[str, str] = {}
        try:
            for name, writer in self.files.items():
                digests[name] = writer.commit()
        except BaseException:
            self.abort()
            raise
        return digests

    def abort(self) -> None:
        """Remove the file parts' temporary files (a rejected form leaves nothing behind)."""
        for writer in self.files.values():
            writer.abort()


async def parse_form(chunks: AsyncIterator[bytes], content_type: str, store: Store, file_fields: set[str],
                     limit: int) -> Form:
    """Parse the body; returns the fields and the file parts, written but not committed.

    The caller validates the form, then calls :meth:`Form.commit` or :meth:`Form.abort`.

    Raises:
        BadForm: not multipart, a part without a name, an unknown or repeated file field, too many parts.
        numdiff.service.store.TooLarge: a file part is larger than ``limit``.
    """
    kind, params = parse_options_header(content_type)
    boundary = params.get(b"boundary")
    if kind != b"multipart/form-data" or not boundary:
        raise BadForm("the body must be multipart/form-data with a boundary")
    form = Form()
    writers: list[BlobWriter] = []
    state: dict[str, object] = {"headers": {}, "field": b"", "value": b"", "name": None, "writer": None,
                                "buf": bytearray(), "parts": 0, "error": None}

    def on_part_begin() -> None:
        state["headers"], state["name"], state["writer"], state["buf"] = {}, None, None, bytearray()
        state["parts"] = int(state["parts"]) + 1  # type: ignore[call-overload]

    def on_header_field(data: bytes, start: int, end: int) -> None:
        state["field"] = bytes(state["field"]) + data[start:end]  # type: ignore[call-overload]

    def on_header_value(data: bytes, start: int, end: int) -> None:
        state["value"] = bytes(state["value"]) + data[start:end]  # type: ignore[call-overload]

    def on_header_end() -> None:
        headers = state["headers"]
        assert isinstance(headers, dict)
        headers[bytes(state["field"]).lower()] = bytes(state["value"])  # type: ignore[call-overload]
        state["field"], state["value"] = b"", b""

    def on_headers_finished() -> None:
        headers = state["headers"]
        assert isinstance(headers, dict)
        _, disp = parse_options_header(headers.get(b"content-disposition", b""))
        name = disp.get(b"name", b"").decode("utf-8", "replace")
        if not name:
            raise BadForm("a form part has no name")
        if int(state["parts"]) > _MAX_PARTS:  # type: ignore[call-overload]
            raise BadForm(f"more than {_MAX_PARTS} form parts")
        state["name"] = name
        if b"filename" in disp or name in file_fields:
            if name not in file_fields:
                raise BadForm(f"unexpected file field {name!r} (expected: {', '.join(sorted(file_fields))})")
            if name in form.files:
                raise BadForm(f"file field {name!r} given twice")
            w = store.writer(limit)
            writers.append(w)
            state["writer"] = w

    def on_part_data(data: bytes, start: int, end: int) -> None:
        w = state["writer"]
        if isinstance(w, BlobWriter):
            w.write(data[start:end])
        else:
            buf = state["buf"]
            assert isinstance(buf, bytearray)
            buf += data[start:end]
            if len(buf) > _MAX_FIELD:
                raise BadForm(f"form field {state['name']!r} is longer than {_MAX_FIELD} bytes")

    def on_part_end() -> None:
        name = str(state["name"])
        w = state["writer"]
        if isinstance(w, BlobWriter):
            w.finish()
            form.sizes[name] = w.size
            form.files[name] = w
        else:
            buf = state["buf"]
            assert isinstance(buf, bytearray)
            form.fields.setdefault(name, []).append(bytes(buf).decode("utf-8", "replace"))

    parser = MultipartParser(boundary, {
        "on_part_begin": on_part_begin, "on_part_data": on_part_data, "on_part_end": on_part_end,
        "on_header_field": on_header_field, "on_header_value": on_header_value, "on_header_end": on_header_end,
        "on_headers_finished": on_headers_finished})
    try:
        async for chunk in chunks:
            parser.write(chunk)
        parser.finalize()
        if any(not w.finished for w in writers):  # the body ended inside a file part
            raise BadForm("the body ended in the middle of a file")
    except BaseException:
        for w in writers:
            w.abort()
        raise
    return form
