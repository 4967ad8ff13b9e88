"""Interpreters, the oracle virtualenv, cached artifacts and machine facts for ``benchmarks/run.py``.

Standard library only: ``run.py`` runs under any ``python3``.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DEFAULT_ORACLE_VENV = Path(os.environ.get("ORACLE_VENV", Path.home() / ".cache" / "numdiff-oracle"))
DEFAULT_CACHE = Path(os.environ.get("NUMDIFF_BENCH_CACHE", Path.home() / ".cache" / "numdiff-bench"))
ORACLE_PINS = ("torch==2.13.0", "executorch==1.5.1")
#: Files whose contents decide the artifacts; editing any of them regenerates.
GENERATOR_FILES = (HERE / "_generate.py", REPO / "scripts" / "_fixture_runtime.py")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _works(python: Path, code: str) -> bool:
    if not python.exists():
        return False
    done = subprocess.run([str(python), "-c", code], capture_output=True, check=False)
    return done.returncode == 0


def oracle_python(given: str | None) -> Path:
    """The oracle's interpreter: ``given``, else the cached venv, made like ``oracle-venv.sh`` if absent."""
    if given:
        python = Path(given)
        if not _works(python, "import executorch.devtools"):
            raise SystemExit(f"--oracle-python {given}: cannot import executorch.devtools\n"
                             "Give a python with executorch==1.5.1 installed, or omit the option.")
        return python
    python = DEFAULT_ORACLE_VENV / "bin" / "python"
    if _works(python, "import executorch.devtools"):
        return python
    log(f"creating the oracle virtualenv in {DEFAULT_ORACLE_VENV} (torch + executorch, several minutes)")
    subprocess.run([sys.executable, "-m", "venv", str(DEFAULT_ORACLE_VENV)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q"]
    subprocess.run(pip + ["--upgrade", "pip"], check=True)
    for pin in ORACLE_PINS:
        subprocess.run(pip + [pin], check=True)
    return python


def numdiff_python(given: str | None) -> Path:
    """numdiff's interpreter: ``given``, else this one if it imports numdiff, else ``.venv``."""
    candidates = [Path(given)] if given else [Path(sys.executable), REPO / ".venv" / "bin" / "python"]
    for python in candidates:
        if _works(python, "import numdiff.inspector"):
            return python
    raise SystemExit(f"no interpreter among {[str(c) for c in candidates]} imports numdiff\n"
                     "Install it: python3 -m venv .venv && .venv/bin/pip install -c constraints.txt -e .")


def compile_bytecode(python: Path) -> None:
    """Write numdiff's ``.pyc`` files, as ``pip install`` does for an installed package.

    The oracle's ExecuTorch was installed by pip, which compiled its bytecode; numdiff is usually
    an editable install whose bytecode Python writes on first import, unless the environment sets
    ``PYTHONDONTWRITEBYTECODE`` (some sandboxes do): then every timed process would compile each
    module numdiff imports lazily inside the timer (about 40 ms on the gap case), which the
    oracle's never does. Compiling once here times both sides like installed packages.
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    code = "import numdiff, os, compileall; compileall.compile_dir(os.path.dirname(numdiff.__file__), quiet=1)"
    subprocess.run([str(python), "-c", code], env=env, check=False, capture_output=True)


def versions(python: Path, packages: tuple[str, ...]) -> dict[str, str]:
    code = ("import json, importlib.metadata as m, sys\n"
            f"print(json.dumps({{p: m.version(p) for p in {list(packages)!r}}} | "
            "{'python': sys.version.split()[0]}))")
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def numdiff_sums(python: Path) -> str:
    """Which loop numdiff's metrics sum with (``sums_kernel()``: the compiled one or numpy's)."""
    code = "from numdiff.comparators.numerics import sums_kernel; print(sums_kernel())"
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.strip().splitlines()[-1]


def artifacts(oracle: Path, cache: Path, oracle_versions: dict[str, str]) -> Path:
    """The generated cases' folder, keyed by generator sources + oracle versions; generated once."""
    digest = hashlib.sha256(json.dumps(oracle_versions, sort_keys=True).encode())
    for path in GENERATOR_FILES:
        digest.update(path.read_bytes())
    out = cache / f"artifacts-{digest.hexdigest()[:16]}"
    if (out / "generated.json").exists():
        log(f"reusing artifacts in {out}")
        return out
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    log(f"generating artifacts with the oracle into {out} (about a minute)")
    subprocess.run([str(oracle), str(HERE / "_generate.py"), str(tmp)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tmp.rename(out)
    return out


def machine() -> dict[str, object]:
    cpu = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = None
    try:
        mem_gib = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError):
        pass
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True, check=False).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "numdiff"],
                           capture_output=True, text=True, check=False).stdout.strip()
    return {
        "platform": platform.platform(),
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "memory_gib": mem_gib,
        "load_avg_at_start": [round(x, 2) for x in os.getloadavg()],
        "numdiff_commit": commit + (" + uncommitted numdiff/ changes" if dirty else ""),
    }
