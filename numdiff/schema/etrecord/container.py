"""The ETRecord record and its reader: the zip's entries read into one :class:`ETRecord`."""

from __future__ import annotations

import io
import os
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO, Generic, TypeVar, overload

from numdiff.errors import ETRecordError
from numdiff.schema.etrecord.entries import (
    REGENERATE,
    EntryReader,
    PickledEntry,
    Program,
    check_directory_at_end,
    is_companion,
)
from numdiff.program.graph_meta import (
    NodeProvenance,
    OpNodeInfo,
    ProgramLoadError,
    op_nodes_from_json,
    provenance_from_json,
)

if TYPE_CHECKING:
    import torch
    from torch.export import ExportedProgram

    from numdiff._core.etrecord import ETRecordLike

__all__ = ["ENTRIES", "ETRecord", "ETRecordEntry", "edge_methods", "op_type_name", "parse_etrecord"]

IDENTIFIER = "ETRECORD_V0"
EDGE_ENTRY = "edge_dialect_exported_program"


@dataclass(frozen=True, slots=True)
class ETRecordEntry:
    """One fixed-name ETRecord entry numdiff knows.

    Attributes:
        name: Entry name inside the zip.
        kind: ``"marker"`` (must exist, content ignored), ``"json"`` or ``"tensors"`` (``torch.save``).
        attribute: :class:`ETRecord` attribute it fills (empty for the marker).
        required: Whether a file without it is rejected.
    """

    name: str
    kind: str
    attribute: str
    required: bool = False


#: The fixed-name entries. Program entries (``exported_program``, ``edge_dialect_exported_program/…``
#: and graph-map programs) are recognised by name and by their three companion entries.
ENTRIES: tuple[ETRecordEntry, ...] = (
    ETRecordEntry(IDENTIFIER, "marker", "", required=True),
    ETRecordEntry("debug_handle_map", "json", "_debug_handle_map"),
    ETRecordEntry("delegate_map", "json", "_delegate_map"),
    ETRecordEntry("instruction_id_to_num_outs_map", "json", "_instruction_id_to_num_outs_map"),
    ETRecordEntry("export_graph_id", "json", "export_graph_id"),
    ETRecordEntry("delegate_info", "json", "_delegate_info"),
    ETRecordEntry("reference_outputs", "tensors", "_reference_outputs"),
    ETRecordEntry("representative_inputs", "tensors", "_representative_inputs"),
)
_BY_NAME = {e.name: e for e in ENTRIES}


_T = TypeVar("_T")


class _Lazy(Generic[_T]):
    """An attribute loaded on first read (programs and pickles), plain and writable like the reference's."""

    def __init__(self, default: Callable[[], _T]) -> None:
        self.default = default

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> _Lazy[_T]: ...

    @overload
    def __get__(self, obj: ETRecord, owner: type | None = None) -> _T: ...

    def __get__(self, obj: ETRecord | None, owner: type | None = None) -> _T | _Lazy[_T]:
        if obj is None:
            return self
        values, loaders = obj._values, obj._loaders
        if self.name in loaders:
            # the loader stays until it succeeds: a failed read raises again on the next one,
            # never leaves the attribute looking absent (None) to later calls
            values[self.name] = loaders[self.name]()
            del loaders[self.name]
        if self.name not in values:
            values[self.name] = self.default()
        value: _T = values[self.name]
        return value

    def __set__(self, obj: ETRecord, value: _T) -> None:
        obj._loaders.pop(self.name, None)
        obj._values[self.name] = value
        if self.name == "edge_dialect_program":
            obj._edge_json = {}  # the JSON no longer describes the program
        obj._sources.pop(self.name, None)


class ETRecord:
    """What an ETRecord file holds, with the reference ``ETRecord``'s attribute names.

    Build it with :func:`parse_etrecord`. Attributes are plain and writable, like the reference's.
    Programs and pickled entries are checked when the file is parsed but built on first read:
    the profiling view needs neither (it reads node metadata with :meth:`op_nodes`), so it never
    pays for torch or for deserializing large programs.

    Attributes:
        exported_program: The ATen program from ``torch.export`` (or ``None``).
        export_graph_id: Id of the exported graph, used to trace ``from_node`` provenance (0 if absent).
        edge_dialect_program: The Edge program; a dict by method name when there are several methods.
        graph_map: Extra recorded programs by entry name (empty dict when none).
        _debug_handle_map: ``{method: {str(instruction_id): handle or [handles]}}``.
        _delegate_map: ``{method: {str(instruction_id): {"name": backend, "delegate_map": {...}}}}``.
        _instruction_id_to_num_outs_map: ``{method: {str(instruction_id): count}}``.
        _delegate_info: ``{"method/lowered_name": {backend metadata}}`` from the ``delegate_info``
            entry (ExecuTorch's next release), or ``None``; see :meth:`delegate_info`.
        _reference_outputs: ``{method: [outputs per run]}``.
        _representative_inputs: Inputs the model was exported/calibrated with.
        path: The file read (``None`` for in-memory input).
        unknown_entries: Zip entries numdiff did not recognise, in file order.
    """

    exported_program: _Lazy[ExportedProgram | None] = _Lazy(lambda: None)
    edge_dialect_program: _Lazy[ExportedProgram | dict[str, ExportedProgram] | None] = _Lazy(lambda: None)
    graph_map: _Lazy[dict[str, ExportedProgram] | None] = _Lazy(dict)
    _reference_outputs: _Lazy[dict[str, list[Any]] | None] = _Lazy(lambda: None)
    _representative_inputs: _Lazy[list[Any] | None] = _Lazy(lambda: None)

    def __init__(self) -> None:
        self._values: dict[str, Any] = {}
        self._loaders: dict[str, Callable[[], Any]] = {}
        self._edge_json: dict[str, dict[str, Any]] = {}
        self._sources: dict[str, Program] = {}
        self._programs: list[Program] = []
        self.export_graph_id: int = 0
        self._debug_handle_map: dict[str, dict[str, Any]] | None = None
        self._delegate_map: dict[str, dict[str, Any]] | None = None
        self._instruction_id_to_num_outs_map: dict[str, dict[str, Any]] | None = None
        self._delegate_info: dict[str, dict[str, Any]] | None = None
        self.path: str | None = None
        self.unknown_entries: tuple[str, ...] = ()

    def check_programs(self) -> None:
        """Check every program entry's graph JSON now, without building any program.

        Programs are otherwise checked just before their first use; call this to reject a
        malformed file up front.

        Raises:
            ETRecordError: The first malformed program, naming the entry, graph, node and field.
        """
        for program in self._programs:
            program.check()

    def delegate_info(self, method: str | None = None) -> dict[tuple[str, str], dict[str, Any]]:
        """Per-delegate backend metadata by ``(method, lowered module name)`` (empty without the entry).

        Args:
            method: Only this method's delegates. Defaults to every method's.
        """
        out: dict[tuple[str, str], dict[str, Any]] = {}
        for key, value in (self._delegate_info or {}).items():
            owner, _, lowered = key.partition("/")
            if method is None or owner == method:
                out[(owner, lowered)] = value
        return out

    def has(self, attribute: str) -> bool:
        """Whether ``attribute`` (e.g. ``"_reference_outputs"``) is set, without loading it."""
        return attribute in self._loaders or self._values.get(attribute) is not None

    def _edge_program_json(self, method: str) -> dict[str, Any] | None:
        """The serialized Edge program of ``method`` (a lone program answers for ``"forward"``), or None."""
        program = self._edge_json.get(method)
        if program is None and len(self._edge_json) == 1 and method == "forward":
            program = next(iter(self._edge_json.values()))
        return program

    def op_nodes(self, method: str = "forward") -> list[OpNodeInfo] | None:
        """The Edge program's op nodes for the profiling view, read from the JSON (no torch).

        Returns None when the record holds no serialized Edge program for ``method`` (for example
        after ``edge_dialect_program`` was replaced); use the program's graph then.
        """
        program = self._edge_program_json(method)
        if program is None:
            return None
        try:
            return op_nodes_from_json(program)
        except ProgramLoadError as e:
            raise ETRecordError(self.path, f"Edge program {method!r}: {e.problem}", e.hint or REGENERATE) from e

    def program_source(self, attribute: str = "exported_program") -> tuple[dict[str, Any], bytes, bytes] | None:
        """``(program JSON, state_dict bytes, constants bytes)`` of a program not yet built, or None.

        Lets the numerical gap build the ATen graph it runs directly, without torch's
        deserializer. None once the program was built or replaced.
        """
        source = self._sources.get(attribute)
        if source is None or attribute not in self._loaders:
            return None
        source.check()
        return source.json, source.parts[1], source.parts[2]

    def remember_debug_handles(self, attribute: str, handles_by_node: dict[str, Any]) -> None:
        """Write ``debug_handle`` meta into a program's nodes by name, now or when it is built.

        The reference leaves the back-propagated handles on the ETRecord's ATen program; numdiff
        may compute them without building it, and applies them when it is first read.
        """
        def apply(program: ExportedProgram) -> ExportedProgram:
            for node in program.graph.nodes:
                if node.op not in ("placeholder", "output"):  # nodes the plan does not name are unset (0)
                    node.meta["debug_handle"] = handles_by_node.get(node.name, 0)
            return program

        loader = self._loaders.get(attribute)
        if loader is None:
            if self._values.get(attribute) is not None:
                apply(self._values[attribute])
            return
        self._loaders[attribute] = lambda: apply(loader())

    def edge_provenance(self, method: str = "forward") -> list[NodeProvenance] | None:
        """Each Edge node's debug handle and ``from_node`` ancestry, read from the JSON.

        What debug-handle back-propagation needs, without loading the Edge program. None when
        unavailable (no serialized Edge program, or one with control-flow subgraphs).
        """
        program = self._edge_program_json(method)
        if program is None:
            return None
        try:
            return provenance_from_json(program)
        except ProgramLoadError as e:
            raise ETRecordError(self.path, f"Edge program {method!r}: {e.problem}", REGENERATE) from e

    @property
    def edge_programs(self) -> dict[str, ExportedProgram]:
        """The Edge programs by method name, whether the file has one method or several."""
        edge = self.edge_dialect_program
        if edge is None:
            return {}
        if isinstance(edge, dict):
            return dict(edge)
        return {"forward": edge}

    def update_representative_inputs(self, representative_inputs: list[Any]) -> None:
        """Replace the representative inputs (a list of input tuples, one per run)."""
        self._representative_inputs = representative_inputs

    def update_reference_outputs(self, reference_outputs: dict[str, list[Any]] | list[Any]) -> None:
        """Replace the reference outputs; a plain list is taken as the ``forward`` method's."""
        self._reference_outputs = {"forward": reference_outputs} if isinstance(reference_outputs, list) else reference_outputs

    def __repr__(self) -> str:
        methods = sorted(self._edge_json) if self._edge_json else sorted(self.edge_programs)
        return f"ETRecord(path={self.path!r}, methods={methods})"


@dataclass(frozen=True, slots=True)
class _OneRun:
    """ExecuTorch 0.7's representative inputs (one run's list of inputs) as later releases hold them: ``[tuple]``."""

    load: Callable[[], Any]

    def __call__(self) -> list[Any] | None:
        value = self.load()
        if isinstance(value, list) and not any(isinstance(item, (list, tuple)) for item in value):
            return [tuple(value)]
        return value  # type: ignore[no-any-return]


def edge_methods(record: ETRecord) -> tuple[str, ...]:
    """The methods ``record`` holds a serialized Edge program for, read without building any (no torch).

    A function, not a method, so that ``ETRecord``'s public surface stays the reference's plus the
    frozen numdiff additions. Empty when the file has none or ``edge_dialect_program`` was replaced;
    read ``edge_dialect_program`` then.
    """
    return tuple(record._edge_json)


if TYPE_CHECKING:

    def _satisfies_protocol(record: ETRecord) -> ETRecordLike:
        return record  # mypy checks that numdiff's record is an ETRecordLike


def op_type_name(node: torch.fx.Node) -> str:
    """The op type the reference shows for ``node`` (its ``target.__name__`` in the reference's graph).

    For Edge ops that is the namespaced name (``"aten.convolution.default"``), for ATen program
    ops the overload name (``"conv2d.default"``), for delegate calls ``"executorch_call_delegate"``.
    Nodes that are not function calls give their ``node.op`` (``"placeholder"``, ``"output"``, …).

    Example:
        >>> rec = parse_etrecord("tests/fixtures/mlp_fp32/etrecord.bin")  # doctest: +SKIP
        >>> [op_type_name(n) for n in rec.edge_dialect_program.graph.nodes if n.op == "call_function"][:1]  # doctest: +SKIP
        ['aten.permute_copy.default']
    """
    if (name := node.meta.get("numdiff_op_type")) is not None:
        return str(name)
    if node.op != "call_function":
        return node.op
    return str(getattr(node.target, "__name__", node.target))


def parse_etrecord(etrecord_path: str | os.PathLike[str] | bytes | BinaryIO) -> ETRecord:
    """Read an ETRecord file into an :class:`ETRecord`.

    Args:
        etrecord_path: Path of the ETRecord zip, its bytes, or a binary file object.

    Returns:
        The parsed record; programs are loaded and runnable.

    Raises:
        ETRecordError: Not a zip, truncated, identifier or a program's companion entry missing,
            corrupt JSON, unknown schema/dialect, or a pickled entry that would need code execution.

    Example:
        >>> rec = parse_etrecord("tests/fixtures/mlp_fp32/etrecord.bin")  # doctest: +SKIP
        >>> rec._debug_handle_map["forward"]["0"]  # doctest: +SKIP
        [1, 2]
    """
    path: str | None
    source: str | os.PathLike[str] | BinaryIO
    if isinstance(etrecord_path, (bytes, bytearray)):
        path, source = None, io.BytesIO(bytes(etrecord_path))
    elif isinstance(etrecord_path, (str, os.PathLike)):
        path, source = os.fspath(etrecord_path), etrecord_path
        if not os.path.isfile(path):
            raise ETRecordError(path, "file not found", "Pass the path of the ETRecord saved by ETRecord.save().")
    else:
        path, source = getattr(etrecord_path, "name", None), etrecord_path
    try:
        archive = zipfile.ZipFile(source, "r")
    except UnicodeDecodeError as e:
        raise ETRecordError(
            path,
            f"an entry name in the zip directory is marked UTF-8 but is not ({e.reason} at byte {e.start})",
            "ExecuTorch writes plain ASCII entry names: the file was altered, damaged or written by another tool. "
            + REGENERATE,
        ) from e
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, NotImplementedError, OverflowError) as e:
        raise ETRecordError(
            path,
            f"not a readable zip archive ({type(e).__name__}: {str(e)[:200]}); the file is not an ETRecord or is truncated",
            "Check that the path points to the ETRecord (not the .pte or ETDump) and that it was copied completely.",
        ) from e
    with archive:
        check_directory_at_end(archive, path)
        return _read_archive(EntryReader(archive, path), path)


def _read_archive(reader: EntryReader, path: str | None) -> ETRecord:
    names = reader.check_directory()
    present = set(names)
    for spec in ENTRIES:
        if spec.required and spec.name not in present:
            raise ETRecordError(
                path,
                f"entry {spec.name!r} is missing: this zip is not an ETRecord (entries: {names[:8]})",
                REGENERATE,
            )
    record = ETRecord()
    record.path = path
    edge: dict[str, Program] = {}
    edge_single: Program | None = None
    graphs: dict[str, Program] = {}
    unknown: list[str] = []
    for name in names:
        known = _BY_NAME.get(name)
        if known is not None:
            if known.kind == "json":
                setattr(record, known.attribute, reader.read_json(name))
            elif known.kind == "tensors":
                record._loaders[known.attribute] = PickledEntry(path, name, reader.read_bytes(name), reader.limits)
        elif is_companion(name, present):
            continue
        elif name == "exported_program":
            record._loaders["exported_program"] = record._sources["exported_program"] = reader.read_program(name)
        elif name == EDGE_ENTRY:
            edge_single = reader.read_program(name)
        elif name.startswith(EDGE_ENTRY + "/"):
            edge[name[len(EDGE_ENTRY) + 1 :]] = reader.read_program(name)
        elif f"{name}_state_dict" in present:
            graphs[name] = reader.read_program(name)
        else:
            unknown.append(name)
    if not edge and edge_single is not None:
        edge = {"forward": edge_single}
        if "exported_program" not in present and "_representative_inputs" in record._loaders:
            # ExecuTorch 0.7's layout (the Edge program alone): its representative inputs are one
            # run's inputs (the first bundled test case's), where later releases keep one tuple per run
            record._loaders["_representative_inputs"] = _OneRun(record._loaders["_representative_inputs"])
    if edge:
        record._edge_json = {method: program.json for method, program in edge.items()}
        if len(edge) == 1:
            record._loaders["edge_dialect_program"] = next(iter(edge.values()))
        else:
            record._loaders["edge_dialect_program"] = lambda: {m: p() for m, p in edge.items()}
    if graphs:
        record._loaders["graph_map"] = lambda: {n: p() for n, p in graphs.items()}
    record._programs = [*record._sources.values(), *edge.values(), *graphs.values()]
    record.unknown_entries = tuple(unknown)
    if unknown:
        warnings.warn(
            f"ETRecord {path or '(in memory)'}: ignored {len(unknown)} unknown entr{'y' if len(unknown) == 1 else 'ies'}: "
            f"{unknown}; known entries: {[e.name for e in ENTRIES]} and program entries",
            stacklevel=3,
        )
    return record
