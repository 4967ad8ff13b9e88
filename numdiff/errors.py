"""Every error numdiff raises on purpose.

::

    NumdiffError                      root: catch this to catch anything numdiff raises on purpose
    ├── InputError (ValueError)       a file the user gave is wrong or does not fit the others
    │   ├── ETDumpError               truncated, corrupt or wrong-identifier ETDump
    │   ├── DebugBufferError          tensor points past the end of the debug buffer, unreadable buffer,
    │   │                             or a file that is not a debug buffer (a zip, an ETDump, a .pte)
    │   ├── ETRecordError             not a zip, missing or unreadable entry, program that will not load
    │   ├── ProgramArchiveError       a .pt2 archive (torch.export.save) numdiff cannot read safely
    │   ├── MismatchedArtifactsError  ETRecord and ETDump come from different models
    │   │   └── analysis.diff.DifferentProgramsError  two analyses of different programs (numdiff diff, compare)
    │   ├── MissingDataError          something needed is absent (debug buffer, ETRecord,
    │   │                             representative inputs, intermediate outputs)
    │   ├── AnalysisFileError         a saved analysis (numdiff analyze) is unreadable, invalid or too new
    │   ├── DelegateMetadataError     delegate metadata in the ETDump claims a known format but is malformed
    │   ├── program.graph_meta.ProgramLoadError  a program's JSON or companion cannot be built (the
    │   │                             readers add the file and entry: ETRecordError, ProgramArchiveError)
    │   ├── _core.safe_json.TooDeepError         JSON nested past max_nesting_depth (readers name the file)
    │   ├── batch.manifest.ManifestError         a batch manifest that is unreadable or invalid
    │   ├── service.upload.BadForm               an upload form the service refuses (answered 422)
    │   ├── service.store.TooLarge               an upload over the size or quota limit (answered 413)
    │   └── service.client.ServiceInputError     the server refused the input, or its analysis failed on it
    ├── UsageError (ValueError)       an argument is wrong (unknown metric or graph, conflicting options)
    │   ├── UsageTypeError (TypeError)      an argument has the wrong type (where the reference raises TypeError)
    │   ├── UnknownNameError (KeyError)     a name that is not there (a graph name; the reference raises KeyError)
    │   └── MissingDependencyError          an optional extra is not installed (names the pip extra)
    ├── ComparatorError               a comparator hook failed or returned something that is not a number
    │   ├── ComparatorTypeError (TypeError)   the hook's result has the wrong type (e.g. not a dict)
    │   └── ComparatorValueError (ValueError) a malformed result, or a hook raised ValueError
    ├── CaptureError                  running the reference graph failed at a node
    ├── InternalError                 a bug in numdiff: please report it
    ├── batch.executors.WorkerDied    a worker process died analysing one run: killed, out of memory
    │                                 (recorded as that run's failure, not raised)
    ├── service.client.AuthError, UnreachableError, ServiceError   the service client's failures
    ├── service.web.pages.PageAnswer           caught inside numdiff: a page answering with the sign-in
    │                                          form or an error page a person can leave
    ├── program.graph_args.Unsupported         caught inside numdiff: a construct the program builder
    │                                          does not know (the loader falls back to torch's)
    └── program._allowlist.ForbiddenOperator   caught inside numdiff: a refused operator name (the
                                               guard collects them into one ProgramLoadError)

Messages follow one shape: the first line says what is wrong and where (file and byte offset,
debug handle, node); the second says what was expected or what to do. Errors always chain the
underlying exception (``raise ... from e``). ``InputError`` and ``UsageError`` also derive from
``ValueError`` so code written against the reference's ``ValueError`` keeps working.
"""

from __future__ import annotations

import os

__all__ = [
    "AnalysisFileError",
    "CaptureError",
    "ComparatorError",
    "ComparatorTypeError",
    "ComparatorValueError",
    "DebugBufferError",
    "DelegateMetadataError",
    "ETDumpError",
    "ETRecordError",
    "InputError",
    "InternalError",
    "MismatchedArtifactsError",
    "MissingDataError",
    "MissingDependencyError",
    "NumdiffError",
    "ProgramArchiveError",
    "UnknownNameError",
    "UsageError",
    "UsageTypeError",
]


class NumdiffError(Exception):
    """Root of every error numdiff raises on purpose."""


class InputError(NumdiffError, ValueError):
    """A file the user gave is wrong, or does not fit the other files."""


class _FileError(InputError):
    """An input error tied to one file (and optionally a byte offset in it)."""

    kind = "file"

    def __init__(self, path: str | os.PathLike[str] | None, problem: str, hint: str = "", offset: int | None = None):
        self.path = None if path is None else os.fspath(path)
        self.problem = problem
        self.hint = hint
        self.offset = offset
        where = f"{self.kind} {self.path!r}" if self.path is not None else f"{self.kind} (in memory)"
        if offset is not None:
            where += f" at byte {offset}"
        message = f"{where}: {problem}"
        if hint:
            message += f"\n{hint}"
        super().__init__(message)


class ETDumpError(_FileError):
    """The ETDump is empty, truncated, corrupt or not an ETDump at all."""

    kind = "ETDump"


class DebugBufferError(_FileError):
    """The debug buffer cannot serve a tensor the ETDump points at."""

    kind = "debug buffer"


class ETRecordError(_FileError):
    """The ETRecord is not a readable ETRecord zip, or an entry in it is unusable."""

    kind = "ETRecord"


class ProgramArchiveError(_FileError):
    """A ``.pt2`` archive (``torch.export.save``) is unreadable, over the limits, or holds something numdiff refuses."""

    kind = ".pt2 archive"


class MismatchedArtifactsError(InputError):
    """The ETRecord and the ETDump do not describe the same model."""


class MissingDataError(InputError):
    """Something the requested analysis needs is not in the given files."""


class AnalysisFileError(_FileError):
    """A saved analysis file is unreadable, not valid JSON, fails validation, or comes from a newer numdiff."""

    kind = "analysis file"


class DelegateMetadataError(InputError):
    """Delegate debug metadata in the ETDump says it is a known format (e.g. VGF statistics) but is malformed."""


class UsageError(NumdiffError, ValueError):
    """An argument is wrong: unknown name, conflicting options, unsupported combination."""


class UsageTypeError(UsageError, TypeError):
    """An argument has the wrong type; also a ``TypeError``, as the reference raises there."""


class UnknownNameError(UsageError, KeyError):
    """A name (a graph, a block) that is not there; also a ``KeyError``, as the reference raises there."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0]) if self.args else ""


def install_command(extra: str) -> str:
    """The command that installs numdiff's optional ``extra``, as the README's set-up writes it.

    numdiff is installed from its clone (``pip install -c constraints.txt -e .``), so an extra is
    ``pip install -c constraints.txt -e '.[extra]'`` run in that folder; when the current folder is
    another, the command begins with ``cd`` to it. (Asking pip for the extra of the name "numdiff"
    would fetch an unrelated project of that name from PyPI.) A numdiff installed without its clone
    gets the same command, to run in the clone it came from.
    """
    command = f"pip install -c constraints.txt -e '.[{extra}]'"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if not os.path.isfile(os.path.join(root, "pyproject.toml")):
        return f"{command} (in numdiff's clone)"
    try:
        here = os.getcwd()
    except OSError:  # the current folder was removed
        here = ""
    if here and os.path.realpath(here) == os.path.realpath(root):
        return command
    import shlex

    return f"cd {shlex.quote(root)} && {command}"


class MissingDependencyError(UsageError):
    """An optional dependency is not installed; the message names the pip extra that brings it
    (:func:`install_command`, the README's form)."""

    def __init__(self, what: str, module: str, extra: str, otherwise: str = "") -> None:
        self.module = module
        self.extra = extra
        super().__init__(f"{what} needs the optional package {module!r}, which is not installed\n"
                         f"Install it with: {install_command(extra)}" + (f" ({otherwise})" if otherwise else ""))


class ComparatorError(NumdiffError):
    """A comparator hook raised or returned something that is not a real number."""


class ComparatorTypeError(ComparatorError, TypeError):
    """A hook returned a value of the wrong type; also a ``TypeError``, as the reference raises there."""


class ComparatorValueError(ComparatorError, ValueError):
    """A hook returned a malformed value, or raised ``ValueError``; also a ``ValueError``, as in the reference."""


class CaptureError(NumdiffError):
    """Running the reference graph on the representative inputs failed at a node."""


class InternalError(NumdiffError):
    """An invariant inside numdiff broke. This is a bug: please report it with the inputs."""
