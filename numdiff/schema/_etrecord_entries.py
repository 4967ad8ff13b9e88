"""Reading the entries of an ETRecord zip: bytes, JSON maps, pickles and programs, all checked.

Programs are checked (valid JSON, a schema and dialect numdiff reads) when the file is parsed and
built only when first needed; pickles are unpickled, weights only, when first needed.
"""

from __future__ import annotations

import io
import json
import zipfile
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from numdiff.errors import ETRecordError
from numdiff.schema._graph_meta import ProgramLoadError, check_header

if TYPE_CHECKING:
    from torch.export import ExportedProgram

_EOCD_SIGNATURE = b"PK\x05\x06"
_EOCD_SIZE = 22
COMPANION_SUFFIXES = ("_state_dict", "_constants", "_example_inputs")
REGENERATE = "Regenerate it with ExecuTorch: to_edge_transform_and_lower(..., generate_etrecord=True) and etrecord.save(path)."


def check_directory_at_end(archive: zipfile.ZipFile, path: str | None) -> None:
    """Reject files whose zip directory is not at the very end (truncated, or a zip inside junk).

    A truncated ETRecord can still *look* like a zip: the pickled entries are zips themselves, and
    zipfile then finds one of those inner directories. ETRecord.save always ends the file with
    the end-of-central-directory record, so check that it sits where it must.
    """
    fp = archive.fp
    if fp is None:  # pragma: no cover - archive is open here
        return
    where = fp.tell()
    try:
        size = fp.seek(0, io.SEEK_END)
        expected = size - _EOCD_SIZE - len(archive.comment)
        fp.seek(max(expected, 0))
        found = fp.read(4)
    finally:
        fp.seek(where)
    if expected < 0 or found != _EOCD_SIGNATURE:
        raise ETRecordError(
            path,
            "the zip directory is not at the end of the file: the file is truncated or not an ETRecord",
            "Copy the ETRecord again or regenerate it.",
        )


def is_companion(name: str, present: set[str]) -> bool:
    return any(name.endswith(s) and name[: -len(s)] in present for s in COMPANION_SUFFIXES)


def read_bytes(archive: zipfile.ZipFile, path: str | None, name: str) -> bytes:
    try:
        return archive.read(name)
    except KeyError as e:
        raise ETRecordError(path, f"entry {name!r} is missing", REGENERATE) from e
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as e:
        raise ETRecordError(
            path,
            f"entry {name!r} cannot be read ({type(e).__name__}: {e}); the file is truncated or corrupt",
            "Copy the ETRecord again or regenerate it.",
        ) from e


def read_json(archive: zipfile.ZipFile, path: str | None, name: str) -> Any:
    data = read_bytes(archive, path, name)
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ETRecordError(path, f"entry {name!r} is not valid JSON ({e})", REGENERATE) from e


@dataclass(frozen=True, slots=True)
class PickledEntry:
    """A ``torch.save`` entry, unpickled (weights only) when first needed."""

    path: str | None
    name: str
    data: bytes

    def __call__(self) -> Any:
        from numdiff.schema._pickles import load_torch_artifact

        try:
            return load_torch_artifact(self.data, f"entry {self.name!r}")
        except ProgramLoadError as e:
            raise ETRecordError(self.path, e.problem, e.hint) from e


@dataclass(frozen=True, slots=True)
class Program:
    """A program entry: its JSON checked and parsed now, the ``ExportedProgram`` built when first needed."""

    path: str | None
    name: str
    parts: tuple[bytes, bytes, bytes, bytes]
    json: dict[str, Any]

    def __call__(self) -> ExportedProgram:
        from numdiff.schema._export_serde import load_program

        try:
            return load_program(*self.parts)
        except ProgramLoadError as e:
            raise ETRecordError(self.path, f"entry {self.name!r}: {e.problem}", e.hint or REGENERATE) from e


def read_program(archive: zipfile.ZipFile, path: str | None, name: str) -> Program:
    state_dict, constants, example_inputs = (read_bytes(archive, path, name + s) for s in COMPANION_SUFFIXES)
    parts = (read_bytes(archive, path, name), state_dict, constants, example_inputs)
    try:
        program = json.loads(parts[0].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ETRecordError(path, f"entry {name!r}: program is not valid JSON: {e}", REGENERATE) from e
    try:
        check_header(program)
    except ProgramLoadError as e:
        raise ETRecordError(path, f"entry {name!r}: {e.problem}", e.hint or REGENERATE) from e
    return Program(path, name, parts, program)
