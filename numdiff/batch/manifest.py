"""Manifests: which runs a batch analyses, read from CSV, JSON, YAML or a directory layout.

Every form gives the same validated :class:`RunSpec` list. Paths are relative to the manifest's
folder and must stay inside it: a path with ``..``, an absolute path, ``~`` or a symlink that leads
out of the folder is refused (``allow_outside=True``, ``numdiff batch --allow-outside``, lifts that for
a manifest you trust); no file is opened to check it, so an error never quotes a file's bytes. A
missing artifact file is *not* a manifest error: the run is recorded as failed with that reason and
the batch goes on. A CSV is read as a stream, row by row; a manifest holds at most :data:`MAX_RUNS` runs.

* **CSV**: a header with ``run``, ``etdump``, ``etrecord``, ``debug_buffer``, optionally ``step_inputs``
  (the inputs the run used: a ``torch.save`` list of its input tuples, on which its culprits are
  judged), and any label columns (``device``, ``build``, ``input_set`` ...). Empty
  ``etrecord``/``debug_buffer``/``step_inputs`` cells mean "none".
* **JSON / YAML**: a list of objects (or ``{"runs": [...]}``) with the same keys; label values go
  either as extra keys or under ``labels``. YAML anchors and aliases are refused (they let a small
  file expand without bound).
* **Directory**: every folder holding ``etdump.etdp`` (or exactly one ``*.etdp``) is a run named by its
  path; ``debug_buffer.bin`` and ``step_inputs.pt`` beside it, and ``etrecord.bin`` beside it or in the
  nearest parent folder;
  ``key=value`` folder names become labels (``device=pixel8/build=1234/run-7/etdump.etdp``).

A malformed manifest raises :class:`ManifestError` naming the file, the row and the column.
"""

from __future__ import annotations

import csv
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from pydantic import BaseModel, ConfigDict

from numdiff.errors import InputError

__all__ = ["ARTIFACT_COLUMNS", "RESERVED_COLUMNS", "ManifestError", "RunSpec", "check_artifacts", "load_manifest"]

ARTIFACT_COLUMNS = ("etdump", "etrecord", "debug_buffer", "step_inputs")
#: Names a label may not take: the tables' own columns.
RESERVED_COLUMNS = frozenset({
    "run", *ARTIFACT_COLUMNS, "labels", "status", "error", "error_type", "reused", "key", "analysis", "seconds", "cpu_seconds", "worker_peak_rss_mib",
    "events", "gap_rows", "culprits", "inputs_in_doubt", "gap_unavailable", "worst_snr_db", "execute_p50_ms", "row", "op", "aot_ops",
    "runtime_ops", "aot_debug_handle", "snr_db", "mse", "l1", "max_abs_error", "matched", "match", "noise_floor_db",
    "below_floor", "snr_in_doubt", "verdict", "is_culprit", "local_snr_db", "amplification", "module", "source_line",
    "latency_p10_ms", "latency_p50_ms", "latency_p90_ms", "latency_avg_ms", "latency_min_ms", "latency_max_ms",
    "latency_runs", "latency_events",
})
_LABEL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
MAX_MANIFEST_BYTES = 256 << 20
#: Runs in one manifest: 100,000 load in a few seconds and about 150 MiB (a run's spec is ~1.4 KiB);
#: past that, one driver is the bottleneck anyway, so a larger fleet is split into several manifests.
MAX_RUNS = 100_000
MAX_CELL_CHARS = 4096


class ManifestError(InputError):
    """The manifest cannot be read, or a row or column of it is wrong."""

    def __init__(self, path: str, where: str, problem: str, hint: str) -> None:
        self.path = path
        super().__init__(f"manifest {path!r}{', ' + where if where else ''}: {problem}\n{hint}")


class RunSpec(BaseModel):
    """One run to analyse: its name, artifact paths (absolute, resolved from the manifest) and labels."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run: str
    etdump: str
    etrecord: str | None = None
    debug_buffer: str | None = None
    #: The inputs the run used (``torch.save`` list of input tuples): its culprits are judged on them.
    step_inputs: str | None = None
    labels: dict[str, str] = {}


def load_manifest(path: str | os.PathLike[str], *, allow_outside: bool = False) -> list[RunSpec]:
    """The runs a manifest (CSV, JSON, YAML file, or a directory) names, validated.

    Args:
        path: The manifest file, or a directory with one folder per run.
        allow_outside: Accept artifact paths outside the manifest's folder (``..``, absolute, ``~``,
            symlinks out of it). Off by default: a manifest from elsewhere cannot make numdiff read
            other files of this machine.

    Raises:
        ManifestError: Unreadable, unknown format, over :data:`MAX_RUNS` runs, a bad row/column or a
            path outside the folder (the message names the row and column).
    """
    name = os.fspath(path)
    if os.path.isdir(name):
        return _from_directory(name, allow_outside)
    suffix = Path(name).suffix.lower()
    if suffix == ".csv":
        with _open(name) as f:
            return _validate(name, _csv_rows(name, f), allow_outside)
    if suffix not in (".json", ".yaml", ".yml"):
        raise ManifestError(name, "", f"unknown manifest format {suffix or '(no extension)'!r}",
                            "Name it .csv, .json, .yaml or .yml, or give a directory of runs.")
    with _open(name) as f:
        try:
            text = f.read()
        except UnicodeDecodeError as e:
            raise ManifestError(name, f"byte {e.start}", "is not UTF-8 text", "Save the manifest as UTF-8.") from e
        except OSError as e:
            raise ManifestError(name, "", f"cannot be read: {e.strerror or e}", "Check the path.") from e
    data = _json(name, text) if suffix == ".json" else _yaml(name, text)
    return _validate(name, _object_rows(name, data, "runs"), allow_outside)


def check_artifacts(specs: Sequence[RunSpec], analyses: Sequence[str], manifest: str | os.PathLike[str]) -> None:
    """Refuse a batch whose manifest gives no run what the asked analyses need (rather than a silent profile).

    The gap and culprits need each run's ETRecord and debug buffer. A run with empty cells is analysed
    as far as its files allow (its row says why); a manifest where *no* run has them is a mistake.

    Raises:
        ManifestError: ``analyses`` include the gap but no run has both an ETRecord and a debug buffer.
    """
    if "gap" not in analyses or any(s.etrecord and s.debug_buffer for s in specs):
        return
    missing = [c for c in ("etrecord", "debug_buffer") if not any(getattr(s, c) for s in specs)]
    what = " and ".join(f"'{c}'" for c in missing) or "'etrecord' and 'debug_buffer' (together)"
    asked = ",".join(analyses)
    name = os.fspath(manifest)
    source = ("etrecord.bin / debug_buffer.bin files" if os.path.isdir(name)
              else f"{'columns' if len(missing) != 1 else 'column'} {what}")
    raise ManifestError(name, "", f"no run has the {source} that --analyses {asked} needs",
                        "Add the ETRecord and debug buffer of each run, or ask for the profile only: "
                        "--analyses profile.")


# --- reading ------------------------------------------------------------------------------------

def _open(name: str) -> TextIO:
    """The manifest opened as UTF-8 text (a BOM skipped), after checking its size."""
    try:
        f = open(name, encoding="utf-8-sig", newline="")
    except OSError as e:
        raise ManifestError(name, "", f"cannot be read: {e.strerror or e}", "Check the path.") from e
    size = os.fstat(f.fileno()).st_size
    if size > MAX_MANIFEST_BYTES:
        f.close()
        raise ManifestError(name, "", f"is {size} bytes, over the {MAX_MANIFEST_BYTES}-byte limit",
                            "Split the fleet into several manifests and batches.")
    return f


#: A row as read: (where it is, e.g. "row 3 (line 4)", {column: cell}).
_Row = tuple[str, dict[str, Any]]


def _csv_rows(name: str, lines: Iterable[str]) -> Iterator[_Row]:
    """The rows of a CSV manifest, one at a time (the file is never held whole)."""
    reader = csv.reader(lines)
    try:
        header = next(reader, None)
        if header is None:
            raise ManifestError(name, "", "is empty", "Write a header line: run,etdump,etrecord,debug_buffer[,labels...].")
        header = [h.strip() for h in header]
        seen: set[str] = set()
        for col, h in enumerate(header, 1):
            if h in seen:
                raise ManifestError(name, f"line 1, column {col} {h!r}", "the column name appears twice",
                                    "Give every column a distinct name.")
            seen.add(h)
        for number, cells in enumerate(reader, 1):
            if not any(c.strip() for c in cells):
                continue
            where = f"row {number} (line {reader.line_num})"
            if len(cells) != len(header):
                raise ManifestError(name, where, f"has {len(cells)} cells, the header has {len(header)} columns",
                                    "Every row needs one cell per header column (leave a cell empty for none).")
            yield where, dict(zip(header, cells))
    except csv.Error as e:
        raise ManifestError(name, f"line {reader.line_num}", f"is not valid CSV ({e})",
                            "Quote cells that hold commas or quotes.") from e
    except UnicodeDecodeError as e:
        raise ManifestError(name, f"after line {reader.line_num}", "is not UTF-8 text",
                            "Save the manifest as UTF-8.") from e
    except OSError as e:
        raise ManifestError(name, "", f"cannot be read: {e.strerror or e}", "Check the path.") from e


def _json(name: str, text: str) -> object:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError) as e:
        raise ManifestError(name, "", f"is not valid JSON ({e})", "Fix the syntax at the position given.") from e


def _yaml(name: str, text: str) -> object:
    try:
        import yaml
    except ImportError as e:
        from numdiff.errors import MissingDependencyError

        raise MissingDependencyError("a YAML manifest", "yaml", "batch") from e
    try:
        for token in yaml.scan(text):
            if isinstance(token, (yaml.AliasToken, yaml.AnchorToken)):
                mark = token.start_mark
                raise ManifestError(name, f"line {mark.line + 1}", "uses a YAML anchor or alias",
                                    "Write every run out in full (anchors and aliases are refused).")
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ManifestError(name, "", f"is not valid YAML ({' '.join(str(e).split())})",
                            "Fix the syntax at the position given.") from e
    except RecursionError as e:
        raise ManifestError(name, "", "nests too deeply", "A manifest is a flat list of runs.") from e


def _object_rows(name: str, data: object, key: str) -> list[_Row]:
    if isinstance(data, Mapping) and key in data:
        data = data[key]
    if not isinstance(data, list):
        raise ManifestError(name, "", f"holds a {type(data).__name__}, not a list of runs",
                            'Write a list of objects, or {"runs": [...]}, each with run, etdump, etrecord, debug_buffer.')
    if len(data) > MAX_RUNS:
        raise ManifestError(name, "", f"lists {len(data)} runs, more than {MAX_RUNS}", "Split the manifest.")
    rows: list[_Row] = []
    for i, item in enumerate(data):
        where = f"runs[{i}]"
        if not isinstance(item, Mapping):
            raise ManifestError(name, where, f"is a {type(item).__name__}, not an object",
                                "Each run is an object with run, etdump, etrecord, debug_buffer and labels.")
        row: dict[str, Any] = {}
        for k, v in item.items():
            if k == "labels":
                if not isinstance(v, Mapping):
                    raise ManifestError(name, f"{where}, column 'labels'", f"is a {type(v).__name__}, not an object",
                                        'Write labels as {"device": "pixel8", ...}.')
                for lk, lv in v.items():
                    if str(lk) in row:
                        raise ManifestError(name, f"{where}, column {str(lk)!r}", "is given twice",
                                            "Give a label either as a key or under 'labels', not both.")
                    row[str(lk)] = lv
            else:
                if str(k) in row:
                    raise ManifestError(name, f"{where}, column {str(k)!r}", "is given twice",
                                        "Give a label either as a key or under 'labels', not both.")
                row[str(k)] = v
        rows.append((where, row))
    return rows


def _from_directory(name: str, allow_outside: bool) -> list[RunSpec]:
    root = Path(os.path.realpath(name))  # absolute: a relative name ("." or "../fleet") resolves from here
    rows: list[_Row] = []
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        here = Path(folder)
        dumps = ["etdump.etdp"] if "etdump.etdp" in files else sorted(f for f in files if f.endswith(".etdp"))
        if not dumps:
            continue
        rel = here.relative_to(root)
        where = f"folder {str(rel) or '.'!r}"
        if len(dumps) > 1:
            raise ManifestError(name, where, f"holds {len(dumps)} .etdp files ({', '.join(dumps[:3])} ...)",
                                "Put one run per folder, or name the run's dump etdump.etdp.")
        record = next((str(p / "etrecord.bin") for p in [here, *here.parents]
                       if (p / "etrecord.bin").is_file() and (p == root or root in p.parents)), None)
        labels = {}
        for part in rel.parts:
            key, sep, value = part.partition("=")
            if sep:
                labels[key] = value
        row: dict[str, Any] = {"run": rel.as_posix() if rel.parts else root.name, "etdump": str(here / dumps[0]),
                               "etrecord": record,
                               "debug_buffer": str(here / "debug_buffer.bin") if "debug_buffer.bin" in files else None,
                               "step_inputs": str(here / "step_inputs.pt") if "step_inputs.pt" in files else None,
                               **labels}
        rows.append((where, row))
    if not rows:
        raise ManifestError(name, "", "holds no run (no folder with etdump.etdp or one *.etdp file)",
                            "Give a manifest file, or a directory with one folder per run.")
    return _validate(name, rows, allow_outside, base=str(root))


# --- validation ---------------------------------------------------------------------------------

def _cell(name: str, where: str, column: str, value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ManifestError(name, f"{where}, column {column!r}", f"is a {type(value).__name__}, not text",
                            "Write paths and labels as plain text (or numbers for labels).")
    text = str(value).strip()
    if len(text) > MAX_CELL_CHARS or "\x00" in text:
        raise ManifestError(name, f"{where}, column {column!r}",
                            "is over 4096 characters or holds a NUL character", "Shorten or fix the value.")
    return text or None


class _Folder:
    """Where a manifest's paths are resolved from, and the check that they stay inside it.

    The check is lexical first (``..``, absolute, ``~``), then on the real path, so a symlink out of
    the folder (of the file itself or of a folder on its way) is caught too. Only ``lstat`` is asked
    of each file, never its content; the real path of each folder is looked up once.
    """

    def __init__(self, name: str, base: str, allow_outside: bool) -> None:
        self.name = name
        self.base = base
        self.allow_outside = allow_outside
        self._prefix = base if base.endswith(os.sep) else base + os.sep
        self._real_folders: dict[str, str] = {}

    def _inside(self, path: str) -> bool:
        return path == self.base or path.startswith(self._prefix)

    def _real(self, path: str) -> str:
        """The real path of ``path`` (symlinks followed), one ``lstat`` per folder not seen before."""
        folder, leaf = os.path.split(path)
        real = self._real_folders.get(folder)
        if real is None:
            real = os.path.realpath(folder) if os.path.dirname(folder) == folder else self._real(folder)
            self._real_folders[folder] = real
        joined = path if real == folder else os.path.join(real, leaf)
        return os.path.realpath(joined) if os.path.islink(joined) else joined

    def resolve(self, where: str, column: str, value: str) -> str:
        """``value`` as an absolute path; refused when it leads out of the folder (unless allowed)."""
        path = os.path.normpath(os.path.join(self.base, os.path.expanduser(value)))
        if self.allow_outside:
            return path
        if not self._inside(path):
            problem = f"the path {value!r} points outside the manifest's folder"
        elif not self._inside(self._real(path)):
            problem = f"the path {value!r} goes through a symlink that leads outside the manifest's folder"
        else:
            return path
        raise ManifestError(self.name, f"{where}, column {column!r}", problem,
                            f"Keep the runs' files under {self.base} (or link nothing out of it), or pass "
                            "--allow-outside (allow_outside=True) for a manifest you trust.")


def _validate(name: str, rows: Iterable[_Row], allow_outside: bool, base: str | None = None) -> list[RunSpec]:
    folder = _Folder(name, base if base is not None else os.path.dirname(os.path.realpath(name)), allow_outside)
    specs: list[RunSpec] = []
    first_row: dict[str, str] = {}
    for where, row in rows:
        if len(specs) >= MAX_RUNS:
            raise ManifestError(name, where, f"more than {MAX_RUNS} runs",
                                "Split the fleet into several manifests (one batch, one driver each).")
        for column in row:
            if column not in ("run", *ARTIFACT_COLUMNS) and (column in RESERVED_COLUMNS or not _LABEL_NAME.match(column)):
                why = ("is a column of numdiff's own tables" if column in RESERVED_COLUMNS
                       else "is not a usable label name (letters, digits and _, not starting with a digit, ≤ 64)")
                raise ManifestError(name, f"{where}, column {column!r}", f"the label name {why}",
                                    "Rename the label column (for example device, build, input_set).")
        cells = {c: _cell(name, where, c, v) for c, v in row.items()}
        for required in ("run", "etdump"):
            if not cells.get(required):
                raise ManifestError(name, f"{where}, column {required!r}", "is missing or empty",
                                    "Every run needs a name ('run') and an ETDump path ('etdump').")
        run = str(cells["run"])
        if run in first_row:
            raise ManifestError(name, f"{where}, column 'run'", f"the run name {run!r} is already used by {first_row[run]}",
                                "Give every run a distinct name.")
        first_row[run] = where
        paths = {c: None if cells.get(c) is None else folder.resolve(where, c, str(cells[c])) for c in ARTIFACT_COLUMNS}
        labels = {c: v for c, v in cells.items() if c not in ("run", *ARTIFACT_COLUMNS) and v is not None}
        specs.append(RunSpec(run=run, etdump=str(paths["etdump"]), etrecord=paths["etrecord"],
                             debug_buffer=paths["debug_buffer"], step_inputs=paths["step_inputs"], labels=labels))
    if not specs:
        raise ManifestError(name, "", "lists no run", "Add one row per run: run,etdump,etrecord,debug_buffer,...")
    return specs
