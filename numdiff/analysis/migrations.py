"""The analysis file on disk: reading its JSON within the input limits, and migrations from older versions.

A file is JSON with ``format_version`` at the top level. On load, the raw JSON object goes
through ``MIGRATIONS[v]`` for every version ``v`` from the file's up to the current one (each
function turns a version-``v`` object into a version ``v + 1`` object) and is then validated
(:meth:`numdiff.analysis.models.Analysis.load`). To change the layout: bump ``FORMAT_VERSION``, add
the function that upgrades the previous version to ``MIGRATIONS``, and commit a file of the
previous version under ``tests/analysis/data/``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from numdiff.analysis.records import FORMAT_VERSION
from numdiff.errors import AnalysisFileError
from numdiff.limits import current_limits, env_var

__all__ = ["MIGRATIONS", "Migration", "invalid_analysis", "migrate", "read_analysis_data"]

#: One step of migration: a raw version-``v`` object to a raw version ``v + 1`` object.
Migration = Callable[[dict[str, Any]], dict[str, Any]]


def _v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """Version 2 adds the optional ``culprits.quantization``, ``culprits.decode`` and
    ``culprits.inside_delegates`` (absent in version 1: nothing to fill)."""
    return {**data, "format_version": 2}


def _v2_to_v3(data: dict[str, Any]) -> dict[str, Any]:
    """Version 3 adds the optional ``culprits.headline``, its counts (``broken``, ``replay_mismatches``,
    ``not_judged``), each culprit row's ``input_sources`` and ``delegate``, and ``program`` (the
    signature of the ETRecord's program, :mod:`numdiff.analysis.signature`). Absent in version 2:
    nothing to fill (a version-2 file has no program signature; ``numdiff diff`` compares it with a
    warning that the programs could not be checked). A version-2 reader refuses a version-3 file as
    too new instead of as invalid."""
    return {**data, "format_version": 3}


def _v3_to_v4(data: dict[str, Any]) -> dict[str, Any]:
    """Version 4 adds the optional ``culprits.inputs_in_doubt``, ``culprits.methods_in_doubt`` and ``culprits.inputs_note`` (what the
    run's graph inputs leave in doubt). Absent in version 3: nothing to fill (the report then says
    nothing about the run's inputs, as it did)."""
    return {**data, "format_version": 4}


#: The gap note numdiff's version-4 code wrote when the reference graph ran on the run's own inputs.
_OWN_INPUTS_NOTE = "the reference graph ran on the run's own inputs"


def _v4_to_v5(data: dict[str, Any]) -> dict[str, Any]:
    """Version 5 adds ``gap.reference_inputs`` (``"own"`` when the reference graph ran on the run's own
    inputs, else ``"representative"``). A version-4 file says it only in a gap note: read from there."""
    gap = data.get("gap")
    if isinstance(gap, dict):
        notes = gap.get("notes")
        own = isinstance(notes, list) and any(isinstance(n, str) and n.startswith(_OWN_INPUTS_NOTE) for n in notes)
        data = {**data, "gap": {**gap, "reference_inputs": "own" if own else "representative"}}
    return {**data, "format_version": 5}


#: ``{v: function turning a version-v object into a version v+1 object}``.
MIGRATIONS: dict[int, Migration] = {1: _v1_to_v2, 2: _v2_to_v3, 3: _v3_to_v4, 4: _v4_to_v5}


def migrate(data: dict[str, Any], path: str | None = None,
            migrations: dict[int, Migration] | None = None) -> dict[str, Any]:
    """Bring a raw analysis object to the current format version.

    Raises:
        AnalysisFileError: No usable ``format_version``, a version newer than this numdiff's,
            or a version no migration starts from.
    """
    table = MIGRATIONS if migrations is None else migrations
    version = data.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise AnalysisFileError(path, f"format_version is {version!r}, not a positive integer",
                                "Is this a file written by 'numdiff analyze'? Write it again with that command.")
    if version > FORMAT_VERSION:
        written_by = data.get("numdiff_version")
        raise AnalysisFileError(
            path, f"format version {version} (written by numdiff {written_by}) is newer than this numdiff reads "
            f"(up to {FORMAT_VERSION})",
            "Update numdiff to a version that reads it (git pull in numdiff's clone).")
    while version < FORMAT_VERSION:
        step = table.get(version)
        if step is None:
            raise AnalysisFileError(path, f"no migration from format version {version}",
                                    "This is a bug in numdiff's migration table: please report it with the file.")
        data = step(dict(data))
        version += 1
        data["format_version"] = version
    return data


def read_analysis_data(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read an analysis file as a raw JSON object brought to the current format version (not yet validated).

    Raises:
        AnalysisFileError: The file cannot be read, is over the input-size limit, is not a JSON
            object, or is from a newer numdiff.
    """
    name = os.fspath(path)
    cap = current_limits().max_entry_bytes
    try:
        with open(name, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > cap:
                raise AnalysisFileError(name, f"is {size} bytes, over the {cap}-byte limit on one input file",
                                        f"If the file is genuine, raise the limit: {env_var('max_entry_bytes')}=<bytes> "
                                        "or numdiff.use_limits(max_entry_bytes=...).")
            raw = f.read()
    except OSError as e:
        raise AnalysisFileError(name, f"cannot be read: {e.strerror or e}",
                                "Check the path; write one with 'numdiff analyze ... -o FILE'.") from e
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise AnalysisFileError(name, f"is not valid JSON ({type(e).__name__}: {e})",
                                "The file is damaged or not an analysis: write it again with 'numdiff analyze'.") from e
    if not isinstance(data, dict):
        raise AnalysisFileError(name, f"holds a JSON {type(data).__name__}, not an object",
                                "Write the file with 'numdiff analyze'.")
    return migrate(data, name)


def invalid_analysis(name: str, error: ValidationError) -> AnalysisFileError:
    """The error for a file whose (migrated) object is not a valid analysis, naming the first invalid fields."""
    problems = "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '(top)'}: {err['msg']}" for err in error.errors()[:5])
    more = f" (and {error.error_count() - 5} more)" if error.error_count() > 5 else ""
    return AnalysisFileError(name, f"is not a valid analysis: {problems}{more}",
                             "The file is damaged or was edited by hand: write it again with 'numdiff analyze'.")
