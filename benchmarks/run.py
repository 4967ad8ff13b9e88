"""numdiff vs ExecuTorch 1.5.1's Inspector on the same real artifacts, measured in the same run.

Usage (from a fresh clone; see ``benchmarks/README.md``)::

    python3 benchmarks/run.py [--oracle-python PATH] [--numdiff-python PATH] [--repeat 3] [--strict]

Steps: make/reuse the oracle virtualenv; generate (once, cached by content key) the two cases
with the oracle; check both sides give the same events (profiling case) and the same gap rows
(gap case); time each side ``--repeat`` times, each in a fresh subprocess (median time, max
peak RSS); print the table and the PASS/FAIL of each target; write ``results.json`` and
``RESULTS.md`` next to this file; cProfile numdiff on both cases. Exit status 0 unless
``--strict`` and a target fails (or the two sides disagree: always 1).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _env
import _report

SIDES = ("numdiff", "oracle")
MEASURE = _env.HERE / "_measure.py"
TIMEOUT_S = 1800


@dataclass(frozen=True)
class Target:
    """One checked goal: ``metric`` of ``case`` at least ``speedup`` × faster at ≤ ``memory`` × peak RSS."""

    name: str
    case: str
    metric: str  # key of _measure.measure_time's result
    speedup: float
    memory: float


#: The gap target is judged like for like: the oracle's ``import executorch.devtools`` loads torch
#: before its timer starts, while numdiff loads torch lazily inside ``Inspector()``. So the gap
#: is compared with torch already imported on both sides, and from a cold start on both sides.
TARGETS = (
    Target("profiling: Inspector()", "profiling", "build_s", 100.0, 0.5),  # issue 13's figure (was 20x)
    Target("profiling: Inspector() + every Event touched (name, perf_data, op_types)", "profiling",
           "build_touched_s", 100.0, 0.5),  # issue 21 item 3
    Target("gap: Inspector() + calculate_numeric_gap('SNR'), torch imported first on both sides",
           "gap_torch_first", "end_to_end_s", 3.0, 0.5),
    Target("gap: import + Inspector() + calculate_numeric_gap('SNR') (cold start, both sides)",
           "gap", "cold_end_to_end_s", 3.0, 0.5),
    Target("gap: Inspector() + calculate_numeric_gap('SNR'), torch imported first, both sides at the "
           "libraries' default threads", "gap_default_threads", "end_to_end_s", 5.0, 0.5),  # issue 21 item 2
)
#: Reported without a target.
INFO_ROWS = (
    ("gap: end to end, numdiff's lazy torch import inside its timer, the oracle's outside", "gap", "end_to_end_s"),
    ("profiling: Inspector(), CPU seconds", "profiling", "build_cpu_s"),
    ("profiling: import + Inspector() (cold start)", "profiling", "cold_build_s"),
    ("gap: end to end, CPU seconds", "gap", "end_to_end_cpu_s"),
    ("gap: Inspector() only", "gap", "build_s"),
    ("gap: calculate_numeric_gap('SNR') only", "gap", "gap_s"),
)


class SideFailed(RuntimeError):
    pass


def warm_page_cache(case_dir: Path) -> None:
    """Read the case's files so both sides start with them in the page cache.

    On the benchmark VM the kernel reclaims cold page-cache pages between runs (kdamond), and
    whichever run came first then paid for disk reads of the 353 MiB debug buffer.
    """
    for path in sorted(case_dir.iterdir()):
        with open(path, "rb", buffering=0) as f:
            while f.read(8 << 20):
                pass


#: Intra-op threads for both sides (``--threads``); 0 keeps the libraries' defaults.
THREADS = {"n": 1}


def _child_env(default_threads: bool = False) -> dict[str, str]:
    env = dict(os.environ)
    if default_threads:
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env.pop(var, None)
    elif THREADS["n"] > 0:
        # On a shared 2-CPU machine torch's default OpenMP pool spin-waits whenever another
        # process holds a core: both sides then vary 3-10x run to run. One thread is stable.
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env[var] = str(THREADS["n"])
    return env


def measure(python: Path, side: str, case: str, case_dir: Path, mode: str,
            default_threads: bool = False) -> dict[str, Any]:
    """Run ``_measure.py`` in a fresh process (page cache warmed first); its ``@@RESULT`` line, parsed."""
    warm_page_cache(case_dir)
    cmd = [str(python), str(MEASURE), side, case, str(case_dir), mode]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, cwd=_env.REPO,
                          env=_child_env(default_threads), check=False)
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("@@RESULT "):
            return json.loads(line[len("@@RESULT "):])  # type: ignore[no-any-return]
    tail = [ln for ln in done.stderr.strip().splitlines() if ln.strip()][-3:]
    raise SideFailed(f"{side} {case} {mode} exited {done.returncode}: " + " | ".join(tail))


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    return bool(a == b)


def sanity(pythons: dict[str, Path], root: Path) -> dict[str, Any]:
    """Both sides must see the same blocks, events and perf values on the profiling case."""
    got = {side: measure(pythons[side], side, "profiling", root / "profiling", "summary") for side in SIDES}
    if not _close(got["numdiff"], got["oracle"]):
        _env.log("numdiff and the oracle DISAGREE on the profiling case:\n"
                 f"numdiff: {json.dumps(got['numdiff'])[:2000]}\noracle:  {json.dumps(got['oracle'])[:2000]}")
        raise SystemExit(1)
    blocks = got["oracle"]["blocks"]
    _env.log(f"sanity OK: {len(blocks)} blocks, {[b['events'] for b in blocks]} events, "
             f"{got['oracle']['dataframe_rows']} DataFrame rows, sampled perf values equal")
    return got["oracle"]


#: ``(run name, case folder, side, _measure mode)`` of every timed run, in the order run per repetition.
PLAN = (
    ("profiling", "profiling", "numdiff", "time"),
    ("profiling", "profiling", "oracle", "time"),
    ("gap", "gap", "numdiff", "time"),
    ("gap", "gap", "oracle", "time"),
    # The oracle's import always loads torch; numdiff loads it inside Inspector()/the gap.
    # This run moves numdiff's torch import before the timer too (compared with the oracle's "gap").
    ("gap_torch_first", "gap", "numdiff", "time-torch"),
    # The same gap with both sides at the libraries' default thread settings (whatever --threads
    # says), torch imported before the timer on both: the two figures side by side in one run.
    ("gap_default_threads", "gap", "numdiff", "time-torch"),
    ("gap_default_threads", "gap", "oracle", "time"),
)
#: Runs made at the libraries' default intra-op threads whatever ``--threads`` says.
DEFAULT_THREAD_RUNS = frozenset({"gap_default_threads"})


def timed_runs(pythons: dict[str, Path], root: Path, repeat: int,
               warmup: int = 0) -> dict[str, dict[str, list[Any]]]:
    """``runs[name][side]``: one result dict (or an error string) per repetition, interleaved, after
    ``warmup`` untimed rounds of the same processes (their results dropped)."""
    for rep in range(warmup):
        for name, case, side, mode in PLAN:
            try:
                measure(pythons[side], side, case, root / case, mode, default_threads=name in DEFAULT_THREAD_RUNS)
            except (SideFailed, subprocess.TimeoutExpired):
                pass  # the timed rounds record the failure
        _env.log(f"warm-up round {rep + 1}/{warmup} done (not timed)")
    runs: dict[str, dict[str, list[Any]]] = {name: {s: [] for s in SIDES} for name, *_ in PLAN}
    for rep in range(repeat):
        for name, case, side, mode in PLAN:
            start = time.perf_counter()
            try:
                result: Any = measure(pythons[side], side, case, root / case, mode,
                                      default_threads=name in DEFAULT_THREAD_RUNS)
            except (SideFailed, subprocess.TimeoutExpired) as e:
                result = f"error: {e}"
            runs[name][side].append(result)
            _env.log(f"[{rep + 1}/{repeat}] {name:15s} {side:7s} {time.perf_counter() - start:6.1f}s "
                     + (result if isinstance(result, str) else
                        " ".join(f"{k}={v:.2f}" for k, v in result.items() if isinstance(v, float))))
    return runs


def aggregate(results: list[Any], metric: str) -> dict[str, Any]:
    ok = [r for r in results if isinstance(r, dict) and metric in r]
    if not ok:
        errors = [r for r in results if isinstance(r, str)]
        return {"error": errors[0] if errors else "no result"}
    return {
        "median_s": statistics.median(r[metric] for r in ok),
        "all_s": [r[metric] for r in ok],
        "peak_mib": max(r["peak_mib"] for r in ok),
        "import_s": statistics.median(r["import_s"] for r in ok),
    }


def gap_agreement(runs: dict[str, list[Any]]) -> str:
    digests = {s: next((r["digest"] for r in runs[s] if isinstance(r, dict)), None) for s in SIDES}
    if digests["numdiff"] is None or digests["oracle"] is None:
        return "not checked (a side failed)"
    if _close(digests["numdiff"], digests["oracle"]):
        return f"same {digests['oracle']['rows']} rows and SNR values"
    return "DIFFERENT rows or SNR values"


def compare(runs: dict[str, dict[str, list[Any]]]) -> list[dict[str, Any]]:
    rows = []
    specs = [(t.name, t.case, t.metric, t) for t in TARGETS] + [(n, c, m, None) for n, c, m in INFO_ROWS]
    for name, case, metric, target in specs:
        row: dict[str, Any] = {"name": name, "case": case, "metric": metric,
                               **{s: aggregate(runs[case][s], metric) for s in SIDES}}
        nd, ora = row["numdiff"], row["oracle"]
        if "error" not in nd and "error" not in ora:
            row["speedup"] = ora["median_s"] / nd["median_s"]
            row["memory_ratio"] = nd["peak_mib"] / ora["peak_mib"]
        if target is not None:
            row["target"] = asdict(target)
            answers_ok = not case.startswith("gap") or gap_agreement(runs["gap"]).startswith("same")
            row["pass"] = ("speedup" in row and answers_ok and row["speedup"] >= target.speedup
                           and row["memory_ratio"] <= target.memory)
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--oracle-python", help="python with executorch==1.5.1 (default: make/reuse "
                        f"{_env.DEFAULT_ORACLE_VENV})")
    parser.add_argument("--numdiff-python", help="python that imports numdiff (default: this one, "
                        "else .venv/bin/python)")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per side and case (default 5)")
    parser.add_argument("--warmup", type=int, default=1,
                        help="untimed rounds of every case and side first (default 1; see benchmarks/README.md)")
    parser.add_argument("--cache-dir", type=Path, default=_env.DEFAULT_CACHE,
                        help=f"where generated artifacts live (default {_env.DEFAULT_CACHE})")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads for both sides "
                        "(OMP_NUM_THREADS; default 1, stable on a shared machine; 0 = library defaults)")
    parser.add_argument("--no-profile", action="store_true", help="skip the cProfile of numdiff")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target fails")
    args = parser.parse_args(argv)

    THREADS["n"] = args.threads
    pythons = {"oracle": _env.oracle_python(args.oracle_python),
               "numdiff": _env.numdiff_python(args.numdiff_python)}
    _env.compile_bytecode(pythons["numdiff"])
    info: dict[str, Any] = {"machine": _env.machine(), "threads": args.threads or "library default", "warmup": args.warmup,
                            "interpreters": {s: str(p) for s, p in pythons.items()}}
    info["versions"] = {
        "oracle": _env.versions(pythons["oracle"], ("torch", "executorch", "pandas")),
        "numdiff": _env.versions(pythons["numdiff"], ("numdiff", "torch", "pandas", "numpy")),
    }
    info["versions"]["numdiff"]["metric sums"] = _env.numdiff_sums(pythons["numdiff"])
    root = _env.artifacts(pythons["oracle"], args.cache_dir, info["versions"]["oracle"])
    info["artifacts"] = {"dir": str(root), **json.loads((root / "generated.json").read_text())}
    try:
        info["sanity"] = sanity(pythons, root)
    except SideFailed as e:
        _env.log(f"sanity check could not run, nothing was timed: {e}")
        return 1

    runs = timed_runs(pythons, root, args.repeat, args.warmup)
    runs["gap_torch_first"]["oracle"] = runs["gap"]["oracle"]
    info["gap_agreement"] = gap_agreement(runs["gap"])
    info["rows"] = compare(runs)
    info["runs"] = runs
    if not args.no_profile:
        info["profile"] = {}
        for case in ("profiling", "gap"):
            try:
                info["profile"][case] = measure(pythons["numdiff"], "numdiff", case, root / case, "profile")
            except SideFailed as e:
                info["profile"][case] = {"error": str(e)}

    print(_report.table(info))
    (_env.HERE / "results.json").write_text(json.dumps(info, indent=1) + "\n")
    (_env.HERE / "RESULTS.md").write_text(_report.markdown(info))
    _env.log(f"wrote {_env.HERE / 'results.json'} and {_env.HERE / 'RESULTS.md'}")
    failed = [r["name"] for r in info["rows"] if r.get("pass") is False]
    return 1 if args.strict and failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
