"""Reading a ``.pt2`` archive (``torch.export.save``) without torch's loader.

``torch.export.load`` resolves operator names from the file and unpickles parts of it, so numdiff
never calls it on a file it is handed. A ``.pt2`` archive is a zip: ``<name>/archive_format``
(``pt2``), ``<name>/byteorder``, the program as ``<name>/models/<model>.json`` (the same
serialized ``ExportedProgram`` an ETRecord holds), and its tensors as raw bytes under
``<name>/data/weights/`` and ``<name>/data/constants/``, each described by a JSON config (dtype,
sizes, strides, storage offset). This module reads all of it with the ETRecord reader's checks:
the zip directory and every entry's inflated size against :mod:`numdiff.limits`, JSON depth, the
program's operators against the allow-list (:mod:`numdiff.program.guard`), and every
tensor's extent against the bytes that hold it. A tensor stored pickled (``use_pickle``) is
unpickled weights-only; the archive's sample inputs are never read.
"""

from __future__ import annotations

import io
import math
import os
import re
import zipfile
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from numdiff.errors import ETRecordError, ProgramArchiveError
from numdiff.limits import current_limits
from numdiff.schema.etrecord.entries import EntryReader, Program, check_directory_at_end
from numdiff.program.graph_args import DTYPES
from numdiff.program.graph_meta import ProgramLoadError, accept_torch_schema, check_header
from numdiff.program.node_names import derive_node_names
from numdiff.program.pickles import load_torch_artifact
from numdiff._core.safe_json import TooDeepError, loads_checked

__all__ = ["load_pt2"]

RESAVE = ("Save it again with torch.export.save (numdiff reads the .pt2 layout of torch 2.9 to 2.15), or pass the ExportedProgram "
          "itself, or an ETRecord of the same program.")
_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,200}\Z")
_STRIDED = 7


class _Int(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    as_int: int = Field(ge=0, le=1 << 48)


class _Device(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)
    type: str


class _TensorMeta(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)
    dtype: int
    sizes: list[_Int] = Field(max_length=64)
    strides: list[_Int] = Field(max_length=64)
    storage_offset: _Int
    layout: int
    requires_grad: bool = False
    device: _Device | None = None


class _Payload(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)
    path_name: str
    is_param: bool = False
    use_pickle: bool = False
    tensor_meta: _TensorMeta | None = None


class _Config(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)
    config: dict[str, _Payload]


def load_pt2(path: str | os.PathLike[str], model: str | None = None) -> torch.export.ExportedProgram:
    """The ``ExportedProgram`` saved in a ``.pt2`` archive, read with numdiff's checks (see the module).

    Args:
        path: The ``.pt2`` file.
        model: Which of the archive's models (``models/<model>.json``); needed only when it holds several.

    Raises:
        ProgramArchiveError: Not a readable ``.pt2`` archive of this layout, an entry over the
            limits, a program with an operator outside the allow-list, or a tensor whose bytes
            are missing or too short.
    """
    name = os.fspath(path)
    if not os.path.isfile(name):
        raise ProgramArchiveError(name, "file not found", "Pass the path of the file torch.export.save wrote.")
    try:
        with zipfile.ZipFile(name, "r") as archive:
            check_directory_at_end(archive, name)
            reader = EntryReader(archive, name)
            return _read(reader, name, set(reader.check_directory()), model)
    except ETRecordError as e:  # the shared zip checks: keep the problem; a limit hint is true here too
        hint = e.hint if "raise the limit" in e.hint else RESAVE
        raise ProgramArchiveError(name, e.problem, hint) from e
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, NotImplementedError, OverflowError) as e:
        if isinstance(e, ProgramArchiveError):
            raise
        raise ProgramArchiveError(name, f"not a readable zip archive ({type(e).__name__}: {str(e)[:200]})",
                                  "Check that the path points to the .pt2 file and that it was copied completely.") from e


def _read(reader: EntryReader, path: str, present: set[str], model: str | None) -> torch.export.ExportedProgram:
    formats = sorted(n for n in present if n.count("/") == 1 and n.endswith("/archive_format"))
    if len(formats) != 1:
        raise ProgramArchiveError(path, "no <name>/archive_format entry: this zip is not a .pt2 archive of the "
                                  f"layout numdiff reads (entries: {sorted(present)[:8]})", RESAVE)
    prefix = formats[0][: -len("archive_format")]
    found = reader.read_bytes(formats[0]).strip()
    if found != b"pt2":
        raise ProgramArchiveError(path, f"archive_format is {found[:40]!r}, not b'pt2'", RESAVE)
    order = reader.read_bytes(prefix + "byteorder").strip() if prefix + "byteorder" in present else b"little"
    if order != b"little":
        raise ProgramArchiveError(path, f"tensors are stored {order[:20]!r}-endian; numdiff reads little-endian "
                                  "archives only", "Save the program on a little-endian machine.")
    models = sorted(n[len(prefix + "models/"):-len(".json")] for n in present
                    if n.startswith(prefix + "models/") and n.endswith(".json") and n.count("/") == 2)
    if model is None:
        if len(models) != 1:
            raise ProgramArchiveError(path, f"the archive holds {len(models)} models {models[:8]}; numdiff needs one",
                                      "Pass which one (model=...)." if models else RESAVE)
        model = models[0]
    elif model not in models:
        raise ProgramArchiveError(path, f"no model {model!r} in the archive (models: {models[:8]})",
                                  "Pass one of the listed names.")
    entry = f"{prefix}models/{model}.json"
    reader.check_program_size(entry, reader.archive.getinfo(entry).file_size)
    raw = reader.read_bytes(entry)
    reader.check_program_size(entry, len(raw))
    try:
        program = loads_checked(raw, reader.limits.max_nesting_depth)
        with accept_torch_schema():
            check_header(program)
        if not isinstance(program, dict):  # check_header guarantees it; this narrows the type
            raise ProgramLoadError("program JSON is not an object")
        derive_node_names(program)  # torch 2.9 (schema 8.14) wrote nodes without names
    except TooDeepError as e:
        raise ProgramArchiveError(path, f"model {model!r}: {e}", e.hint) from e
    except ProgramLoadError as e:
        raise ProgramArchiveError(path, f"model {model!r}: {e.problem}", e.hint or RESAVE) from e
    except ValueError as e:
        raise ProgramArchiveError(path, f"model {model!r} is not valid JSON ({str(e)[:200]})", RESAVE) from e
    weights = _tensors(reader, path, present, prefix, "weights", model)
    constants = _tensors(reader, path, present, prefix, "constants", model)
    parts = (raw, _saved(weights), _saved(constants), b"")
    build = Program(path, f"models/{model}.json", parts, program, reader.limits)
    try:
        with accept_torch_schema():
            return build()
    except ETRecordError as e:
        hint = e.hint if "raise the limit" in e.hint or "allow" in e.hint else RESAVE
        raise ProgramArchiveError(path, e.problem, hint) from e


def _saved(tensors: dict[str, Any]) -> bytes:
    """The tensors as ``torch.save`` bytes: the form the program builder takes (and loads weights-only)."""
    buffer = io.BytesIO()
    torch.save(tensors, buffer)
    return buffer.getvalue()


def _tensors(reader: EntryReader, path: str, present: set[str], prefix: str, kind: str,
             model: str) -> dict[str, Any]:
    config_name = f"{prefix}data/{kind}/{model}_{kind}_config.json"
    if config_name not in present:
        return {}
    try:
        config = _Config.model_validate(loads_checked(reader.read_bytes(config_name), reader.limits.max_nesting_depth))
    except (ValidationError, TooDeepError, ValueError) as e:
        raise ProgramArchiveError(path, f"{config_name!r} is not a valid tensor config: {str(e)[:300]}", RESAVE) from e
    out: dict[str, Any] = {}
    cache: dict[str, bytes] = {}
    for fqn, payload in config.config.items():
        where = f"{kind} {fqn!r}"
        if _NAME.match(payload.path_name) is None or payload.path_name.startswith("."):
            raise ProgramArchiveError(path, f"{where}: file name {payload.path_name[:60]!r} is not a plain name", RESAVE)
        entry = f"{prefix}data/{kind}/{payload.path_name}"
        if entry not in present:
            raise ProgramArchiveError(path, f"{where}: entry {entry!r} is missing", RESAVE)
        data = cache.get(entry)
        if data is None:
            data = cache[entry] = reader.read_bytes(entry)
        if payload.use_pickle:
            try:
                value = load_torch_artifact(data, f"{where} ({entry!r})")
            except ProgramLoadError as e:
                raise ProgramArchiveError(path, e.problem, e.hint) from e
            if not isinstance(value, torch.Tensor):
                raise ProgramArchiveError(path, f"{where}: the pickled entry holds a {type(value).__name__}, "
                                          "not a tensor (custom objects are not read)", RESAVE)
            out[fqn] = value
        else:
            out[fqn] = _raw_tensor(path, where, data, payload.tensor_meta)
        if payload.is_param:
            out[fqn] = torch.nn.Parameter(out[fqn], requires_grad=bool(payload.tensor_meta and
                                                                        payload.tensor_meta.requires_grad))
    return out


def _raw_tensor(path: str, where: str, data: bytes, meta: _TensorMeta | None) -> torch.Tensor:
    if meta is None:
        raise ProgramArchiveError(path, f"{where}: stored raw but has no tensor_meta", RESAVE)
    dtype = DTYPES.get(meta.dtype)
    if dtype is None or meta.layout != _STRIDED:
        raise ProgramArchiveError(path, f"{where}: dtype {meta.dtype} / layout {meta.layout} is not a strided tensor "
                                  "type numdiff reads", RESAVE)
    sizes = [s.as_int for s in meta.sizes]
    strides = [s.as_int for s in meta.strides]
    if len(sizes) != len(strides):
        raise ProgramArchiveError(path, f"{where}: {len(sizes)} sizes but {len(strides)} strides", RESAVE)
    itemsize = torch.empty((), dtype=dtype).element_size()
    numel = math.prod(sizes)
    extent = 0 if numel == 0 else meta.storage_offset.as_int + 1 + sum((n - 1) * s for n, s in zip(sizes, strides))
    cap = current_limits().tensor_bytes_allowed(len(data))
    if extent * itemsize > len(data) or numel * itemsize > cap:
        raise ProgramArchiveError(path, f"{where}: shape {sizes} with strides {strides} needs {extent * itemsize} "
                                  f"bytes, but its entry holds {len(data)}", RESAVE)
    if numel == 0:
        return torch.empty(sizes, dtype=dtype)
    flat = torch.frombuffer(bytearray(data[: extent * itemsize]), dtype=dtype)
    return flat.as_strided(sizes, strides, meta.storage_offset.as_int).clone()
