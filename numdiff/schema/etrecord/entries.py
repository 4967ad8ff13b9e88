"""Reading the entries of an ETRecord zip: bytes, JSON maps, pickles and programs, all checked.

Every size is checked against :mod:`numdiff.limits` before it is used: the zip directory (entry
count, duplicate or encrypted entries, compression methods, declared sizes) before any entry is
read, and each entry while it is inflated in chunks. JSON maps are parsed with their nesting
depth checked and validated with pydantic (:mod:`numdiff.schema.etrecord._models`). Program
entries are parsed and their header checked now; their graphs are checked
(:mod:`numdiff.program.checks`) and built only when first needed. Pickles are unpickled,
weights only, and checked (:mod:`numdiff.program.pickles`) when first needed.
"""

from __future__ import annotations

import dataclasses
import io
import json
import zipfile
import zlib
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

from numdiff._core.types import JSON
from numdiff.errors import ETRecordError
from numdiff.limits import Limits, current_limits, raise_hint, use_limits
from numdiff.schema.etrecord._models import validate_entry
from numdiff.program.graph_meta import ProgramLoadError, check_header
from numdiff.program.checks import check_program
from numdiff.program.node_names import derive_node_names
from numdiff._core.safe_json import TooDeepError, json_depth, loads_checked

if TYPE_CHECKING:
    from torch.export import ExportedProgram

_EOCD_SIGNATURE = b"PK\x05\x06"
_EOCD_SIZE = 22
COMPANION_SUFFIXES = ("_state_dict", "_constants", "_example_inputs")
REGENERATE = (
    "Regenerate it with the ExecuTorch release that exported the model: generate_etrecord=True when lowering, then "
    "get_etrecord().save(path) (1.0 and later), or executorch.devtools.generate_etrecord(path, ...) (0.7)."
)


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


_DAMAGED = "Copy the ETRecord again or regenerate it."
_ALTERED = "ExecuTorch never writes an ETRecord this way: the file was altered, damaged or written by another tool. " + REGENERATE
#: Compression methods numdiff inflates (ExecuTorch writes stored entries; zip tools default to deflate).
_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate"}
_CHUNK = 1 << 20


class EntryReader:
    """Reads an ETRecord zip's entries with every size checked against :mod:`numdiff.limits`.

    Entries are inflated in chunks and reading stops as soon as an entry passes
    ``max_entry_bytes`` or all entries read so far pass ``max_entry_ratio`` times the archive's
    size, so a zip bomb costs at most the cap, never its claimed size.
    """

    def __init__(self, archive: zipfile.ZipFile, path: str | None) -> None:
        self.archive = archive
        self.path = path
        self.limits = current_limits()
        fp = archive.fp
        self.archive_bytes = _size_of(fp) if fp is not None else 0
        self.inflated = 0

    def check_directory(self) -> list[str]:
        """Entry names in file order, after checking the directory: count, names, methods, sizes.

        Raises:
            ETRecordError: Too many entries, a duplicate name, an encrypted entry, a compression
                method numdiff does not inflate, or an entry declaring a size over the limits.
        """
        infos = self.archive.infolist()
        if len(infos) > self.limits.max_entries:
            raise ETRecordError(
                self.path,
                f"the zip lists {len(infos)} entries, more than the limit {self.limits.max_entries} (max_entries)",
                raise_hint("max_entries", len(infos)),
            )
        seen: set[str] = set()
        declared = 0
        for info in infos:
            name = info.filename
            if name in seen:
                raise ETRecordError(self.path, f"entry {name!r} appears twice in the zip", _ALTERED)
            seen.add(name)
            if info.flag_bits & 0x1:
                raise ETRecordError(
                    self.path,
                    f"entry {name!r} is encrypted",
                    "ExecuTorch never encrypts ETRecords: use the file it wrote, or unzip it and zip it again "
                    "without a password.",
                )
            if info.compress_type not in _METHODS:
                raise ETRecordError(
                    self.path,
                    f"entry {name!r} uses zip compression method {info.compress_type}, which numdiff does not inflate",
                    "ExecuTorch writes stored (uncompressed) entries; numdiff also reads deflate. Use the file "
                    "ExecuTorch wrote, or zip it again with stored or deflate compression.",
                )
            declared += info.file_size
            self._check_size(name, info.file_size, declared, declared=True)
        return [info.filename for info in infos]

    def _check_size(self, name: str, size: int, total: int, declared: bool) -> None:
        says = "declares" if declared else "inflates to at least"
        cap = self.limits.max_entry_bytes
        if size > cap:
            raise ETRecordError(
                self.path,
                f"entry {name!r} {says} {size} bytes, more than the limit {cap} bytes (max_entry_bytes)",
                raise_hint("max_entry_bytes", size),
            )
        budget = int(self.limits.max_entry_ratio * self.archive_bytes)
        if total > budget:
            raise ETRecordError(
                self.path,
                f"entry {name!r} {says} {size} bytes; entries would inflate to {total} bytes, more than "
                f"{self.limits.max_entry_ratio:g} times the archive's {self.archive_bytes} bytes (max_entry_ratio): "
                "a zip bomb, or an unusually compressible file",
                raise_hint("max_entry_ratio", -(-total // max(self.archive_bytes, 1)) + 1),
            )

    def read_bytes(self, name: str) -> bytes:
        """The entry's bytes, inflated in chunks and stopped at the limits."""
        try:
            info = self.archive.getinfo(name)
        except KeyError as e:
            raise ETRecordError(self.path, f"entry {name!r} is missing", REGENERATE) from e
        chunks: list[bytes] = []
        size = 0
        # A stored entry yields at most its declared size (zipfile stops there), which the directory
        # check bounded: read it at once (no chunks to join). Deflated ones inflate chunk by chunk.
        step = max(_CHUNK, info.file_size + 1) if info.compress_type == zipfile.ZIP_STORED else _CHUNK
        try:
            with self.archive.open(info) as stream:
                while chunk := stream.read(step):
                    size += len(chunk)
                    self._check_size(name, size, self.inflated + size, declared=False)
                    chunks.append(chunk)
        except ETRecordError:
            raise
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, NotImplementedError) as e:
            raise ETRecordError(
                self.path,
                f"entry {name!r} cannot be read ({type(e).__name__}: {str(e)[:200]}); the file is truncated or corrupt",
                _DAMAGED,
            ) from e
        self.inflated += size
        return b"".join(chunks)

    def check_program_size(self, name: str, size: int) -> None:
        """Refuse a program JSON larger than ``max_program_json_bytes`` before parsing it."""
        cap = self.limits.max_program_json_bytes
        if size > cap:
            raise ETRecordError(
                self.path,
                f"entry {name!r}: the program is {size} bytes of JSON, more than the limit {cap} bytes "
                "(max_program_json_bytes)",
                raise_hint("max_program_json_bytes", size),
            )

    def read_json(self, name: str) -> JSON:
        """A JSON map entry, parsed with its depth checked and its shape validated."""
        data = self.read_bytes(name)
        try:
            value = loads_checked(data, self.limits.max_nesting_depth)
        except TooDeepError as e:
            raise ETRecordError(self.path, f"entry {name!r}: {e}", e.hint) from e
        except ValueError as e:
            raise ETRecordError(self.path, f"entry {name!r} is not valid JSON ({str(e)[:200]})", _ALTERED) from e
        return validate_entry(self.path, name, value)

    def read_program(self, name: str) -> Program:
        """A program entry and its companions; the JSON is parsed when first read (``Program.json``).

        The graph itself is checked (:meth:`Program.check`) before its first use: the profiling
        view reads only the Edge program's node metadata, checked as it is read, and need not pay
        for the rest (nor parse the ATen program, which only the numerical gap runs).
        """
        self.check_program_size(name, self.archive.getinfo(name).file_size)
        state_dict, constants, example_inputs = (self.read_bytes(name + s) for s in COMPANION_SUFFIXES)
        parts = (self.read_bytes(name), state_dict, constants, example_inputs)
        self.check_program_size(name, len(parts[0]))
        return Program(self.path, name, parts, None, self.limits)


def _parse_program(path: str | None, name: str, data: bytes) -> dict[str, Any]:
    """A program entry's JSON, parsed and its header checked."""
    try:
        program = json.loads(data.decode("utf-8"))
    except RecursionError as e:  # json's decoder guards its own recursion: a clean error
        raise ETRecordError(path, f"entry {name!r}: program JSON nested deeper than Python's recursion limit",
                            _ALTERED) from e
    except ValueError as e:
        raise ETRecordError(path, f"entry {name!r}: program is not valid JSON: {str(e)[:200]}", _ALTERED) from e
    try:
        check_header(program)
    except ProgramLoadError as e:
        raise ETRecordError(path, f"entry {name!r}: {e.problem}", e.hint or _ALTERED) from e
    derive_node_names(program)  # ExecuTorch 0.7 (schema 5.3) wrote nodes without names
    return program  # type: ignore[no-any-return]


def _size_of(fp: IO[bytes]) -> int:
    where = fp.tell()
    try:
        return int(fp.seek(0, io.SEEK_END))
    finally:
        fp.seek(where)


@dataclass(frozen=True, slots=True)
class PickledEntry:
    """A ``torch.save`` entry, unpickled (weights only) and checked when first needed."""

    path: str | None
    name: str
    data: bytes
    limits: Limits = field(default_factory=current_limits)

    def __call__(self) -> object:
        from numdiff.program.pickles import load_torch_artifact

        try:
            with use_limits(**dataclasses.asdict(self.limits)):  # the limits in force when the file was read
                return load_torch_artifact(self.data, f"entry {self.name!r}", plain=True)
        except ProgramLoadError as e:
            raise ETRecordError(self.path, e.problem, e.hint) from e


@dataclass(frozen=True, slots=True)
class Program:
    """A program entry: its JSON parsed, its graph checked and the ``ExportedProgram`` built when first needed."""

    path: str | None
    name: str
    parts: tuple[bytes, bytes, bytes, bytes]
    parsed: dict[str, Any] | None  # the JSON when the caller parsed it already, else parsed on first read
    limits: Limits = field(default_factory=current_limits)
    _checked: list[bool] = field(default_factory=list, repr=False, compare=False)
    _json: list[dict[str, Any]] = field(default_factory=list, repr=False, compare=False)

    @property
    def json(self) -> dict[str, Any]:
        """The program JSON (parsed once; its header checked).

        Raises:
            ETRecordError: Not valid JSON, nested too deep, or an unknown schema or dialect.
        """
        if not self._json:
            self._json.append(self.parsed if self.parsed is not None else _parse_program(self.path, self.name, self.parts[0]))
        return self._json[0]

    def check(self) -> None:
        """Check nesting depth and the graph's shape (:func:`check_program`), once.

        Raises:
            ETRecordError: Naming the file, the entry, the graph, the node and the field.
        """
        if self._checked:
            return
        with use_limits(**dataclasses.asdict(self.limits)):  # the limits in force when the file was read
            depth, limit = json_depth(self.parts[0]), self.limits.max_nesting_depth
            if depth > limit:
                error = TooDeepError(depth, limit)
                raise ETRecordError(self.path, f"entry {self.name!r}: program {error}", error.hint)
            try:
                check_program(self.json)
            except ProgramLoadError as e:
                raise ETRecordError(self.path, f"entry {self.name!r}: {e.problem}", e.hint or _ALTERED) from e
        self._checked.append(True)

    def __call__(self) -> ExportedProgram:
        from numdiff.program.guard import guard_program

        self.check()
        try:  # refuse a crafted program before paying seconds for torch's deserializer import
            guard_program(self.json)
        except ProgramLoadError as e:
            raise ETRecordError(self.path, f"entry {self.name!r}: {e.problem}", e.hint or REGENERATE) from e
        from numdiff.program.loader import load_program

        try:
            return load_program(*self.parts)
        except ProgramLoadError as e:
            raise ETRecordError(self.path, f"entry {self.name!r}: {e.problem}", e.hint or REGENERATE) from e
        except RecursionError as e:
            raise ETRecordError(
                self.path, f"entry {self.name!r}: the program is nested too deep to build", _ALTERED
            ) from e
