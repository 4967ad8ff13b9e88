"""The torch compatibility matrix: numdiff's tests, profile, gap and culprits under each torch version.

Dev script, not part of CI (every torch other than the pinned one is a download of several GB on
x86_64). For each ``--torch`` version it makes a fresh virtualenv (``<venv-root>/numdiff-torch-<v>``,
kept for the next run unless ``--fresh``), installs that torch and numdiff (editable, with its
``test`` extra, as the development virtualenv has it; torch held at the version by a constraint),
then runs:

* ``tests``: the pytest subset (``--tests``; defaults to the rooms that run or read programs);
* ``profile``, ``gap``, ``culprits``: ``numdiff profile`` / ``gap --format json`` / ``culprits
  --format json`` on every fixture folder that has an ETRecord and a debug buffer (culprits on the
  ``culprit_*`` folders): a run passes when it exits as it does under the baseline torch (the
  pinned one, ``--baseline``; never status 4, a crash) and prints the same output;
* ``mypy``: ``mypy --strict numdiff`` against that torch's stubs.

Then it prints one table row per torch version. Usage (from the repository root)::

    python3 scripts/torch_matrix.py --torch 2.9.1 --torch 2.14.1 --torch 2.15.0
    python3 scripts/torch_matrix.py --torch 2.13.0 --tests tests/schema   # quicker

``--baseline`` is the python of the pinned environment (default ``.venv/bin/python``). Runs one
torch at a time and one process at a time (the machine is shared).

The matrix virtualenvs' pip runs with ``PIP_CONFIG_FILE=/dev/null`` (and ``--no-cache-dir``): a
machine-wide pip configuration may cap torch (this machine's ``/etc/xdg/pip`` and ``/etc/pip.conf``
constrain ``torch<=2.14.1``), which would make a newer torch impossible to install. Ignoring the
config files for these virtualenvs' installs only lifts the cap there; the machine's configuration
and every other environment keep it. ``PIP_*`` environment variables still apply. Without the cache a
multi-GB CUDA wheel is not stored twice on disk.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"
DEFAULT_TESTS = ["tests/schema", "tests/program", "tests/inspector", "tests/capture", "tests/align", "tests/gap",
                 "tests/culprits"]


@dataclass
class Row:
    torch: str
    results: dict[str, str] = field(default_factory=dict)


def _run(cmd: list[str], timeout: int = 3600, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO,
                          env={**os.environ, **(env or {})})


def make_venv(version: str, root: Path, fresh: bool) -> Path:
    """A virtualenv with torch==version and numdiff (editable); its python."""
    venv = root / f"numdiff-torch-{version}"
    python = venv / "bin" / "python"
    if fresh and venv.exists():
        subprocess.run(["rm", "-rf", str(venv)], check=True)
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as pins:
        pins.write(f"torch=={version}\n")
    # the machine's pip config may cap torch below `version`: ignore config files for this venv only
    no_config = {"PIP_CONFIG_FILE": os.devnull}
    for args in (["torch==" + version], ["-c", pins.name, "-e", ".[test]"]):
        done = _run([str(python), "-m", "pip", "install", "-q", "--progress-bar", "off", "--no-cache-dir", *args],
                    env=no_config)
        if done.returncode:
            raise SystemExit(f"pip install {' '.join(args)} failed for torch {version}:\n{done.stderr[-2000:]}")
    return python


def _fixtures(kind: str) -> list[Path]:
    out = []
    for folder in sorted(p for p in FIXTURES.rglob("*") if p.is_dir()):
        if not (folder / "etrecord.bin").is_file() or not (folder / "debug_buffer.bin").is_file():
            continue
        if (folder / "etdump.etdp").is_file() and (kind != "culprits" or folder.name.startswith("culprit_")):
            out.append(folder)
    return out


def _command(python: str, kind: str, folder: Path) -> list[str]:
    files = ["--etdump", str(folder / "etdump.etdp"), "--etrecord", str(folder / "etrecord.bin"),
             "--debug-buffer", str(folder / "debug_buffer.bin")]
    fmt = [] if kind == "profile" else ["--format", "json"]
    return [python, "-m", "numdiff", "-q", kind, *files, *fmt]


def _normalized(kind: str, text: str) -> str:
    """Profile timings are the runtime's (same file, same numbers); nothing to normalize but line ends."""
    return text.replace("\r\n", "\n")


def cli_runs(python: str, baseline: str, kind: str) -> str:
    folders = _fixtures(kind)
    passed = same = 0
    failures = []
    for folder in folders:
        want = _run(_command(baseline, kind, folder), timeout=900)
        got = _run(_command(python, kind, folder), timeout=900)
        ok = got.returncode == want.returncode and got.returncode != 4
        passed += ok
        same += ok and _normalized(kind, got.stdout) == _normalized(kind, want.stdout)
        if not ok:
            failures.append(f"{folder.name}: exit {got.returncode} ({got.stderr.strip().splitlines()[-1:]})")
    summary = f"{passed}/{len(folders)} ok, {same} same output"
    for failure in failures[:3]:
        print(f"    {kind} {failure}")
    return summary


def pytest_runs(python: str, tests: list[str]) -> str:
    done = _run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests], timeout=7200)
    for line in [line for line in done.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))][:10]:
        print(f"    {line[:200]}")
    tail = done.stdout.strip().splitlines()[-1:] or ["(no output)"]
    counts = dict((kind, int(n)) for n, kind in re.findall(r"(\d+) (passed|failed|error|errors|skipped)", tail[0]))
    return (f"{counts.get('passed', 0)} passed, {counts.get('failed', 0)} failed"
            + (f", {counts.get('error', 0) + counts.get('errors', 0)} errors" if "error" in tail[0] else ""))


def mypy_run(python: str) -> str:
    done = _run([python, "-m", "mypy", "--strict", "numdiff"], timeout=1800)
    last = (done.stdout.strip().splitlines() or ["?"])[-1]
    return "clean" if done.returncode == 0 else last


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch", action="append", required=True, help="a torch version (repeatable)")
    parser.add_argument("--baseline", default=str(REPO / ".venv" / "bin" / "python"),
                        help="python of the pinned environment whose outputs are the reference")
    parser.add_argument("--venv-root", type=Path, default=Path.home() / ".cache")
    parser.add_argument("--tests", action="append", default=None, help="pytest paths (repeatable)")
    parser.add_argument("--fresh", action="store_true", help="remake the virtualenvs")
    parser.add_argument("--json", type=Path, default=None, help="also write the table as JSON here")
    args = parser.parse_args()
    rows = []
    for version in args.torch:
        start = time.monotonic()
        print(f"torch {version}: making the virtualenv", flush=True)
        python = str(make_venv(version, args.venv_root, args.fresh))
        row = Row(version)
        found = _run([python, "-c", "import torch, numdiff; print(torch.__version__)"])
        row.results["torch"] = found.stdout.strip() or f"import failed: {found.stderr.strip()[-200:]}"
        steps = [("tests", lambda: pytest_runs(python, args.tests or DEFAULT_TESTS)),
                 *((kind, lambda kind=kind: cli_runs(python, args.baseline, kind)) for kind in ("profile", "gap", "culprits")),
                 ("mypy --strict", lambda: mypy_run(python))]
        for name, step in steps:
            row.results[name] = step()
            print(f"torch {version}: {name}: {row.results[name]}", flush=True)
        row.results["minutes"] = f"{(time.monotonic() - start) / 60:.1f}"
        rows.append(row)
        print(json.dumps({row.torch: row.results}), flush=True)
    columns = list(rows[0].results)
    table = [["torch", *columns], *[[r.torch, *(r.results[c] for c in columns)] for r in rows]]
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    for i, line in enumerate(table):
        print("| " + " | ".join(cell.ljust(w) for cell, w in zip(line, widths)) + " |")
        if i == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    if args.json is not None:
        args.json.write_text(json.dumps({r.torch: r.results for r in rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
