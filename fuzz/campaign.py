"""Fuzz campaign: mutate the real fixtures and run each mutant through what a user runs.

    python fuzz/campaign.py --mutants 100000 [--kinds etdump,debug_buffer,etrecord] [--workers 2]
                            [--seed S] [--out DIR] [--gap-fraction F]
    python fuzz/campaign.py --replay DIR      # re-run one saved case in-process, with the traceback

Each case runs in a persistent worker subprocess (forked from this process after numdiff and torch
are imported, so no worker pays the import; a worker is replaced after --max-tasks cases, after a
case that grew its memory by more than 256 MiB, and when it is killed after --kill-after seconds, counted
from when its mutant is on disk):
``Inspector(etdump_path, etrecord, debug_buffer_path)``, ``to_dataframe()``,
``print_data_tabular()`` (to a StringIO) and, on a sampled fraction of the cases that have both an
ETRecord and a debug buffer, ``calculate_numeric_gap("SNR")``.

Outcomes: ok; error (a NumdiffError, counted by class); ESCAPE (any other exception: type, message,
innermost numdiff frame); TIMEOUT (over 2 s wall; TIMEOUTs are re-run once alone at the end and the
summary says how many reproduced); MEMORY (peak RSS growth over 1 GiB above the files' size, or an
allocation refused by the per-case RLIMIT_AS guard); MODIFIED (an input file's hash changed); CANARY
(a payload string was executed and wrote the case's canary file); CRASH (the worker died). Every
case that is not ok/error is saved under --out (the mutated files and case.txt) for --replay.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
# One thread per worker: the workers already use the cores, and an OpenMP pool does not survive fork
# (a forked worker that runs a parallel op would hang). Set before torch is imported.
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

from fuzz._worker import STARTED, CaseResult, classify, worker_loop  # noqa: E402
from fuzz.mutators import FILENAMES, KINDS, find_seeds, seeds_for  # noqa: E402

#: Seconds a worker may spend building one mutant (a 1,200-run ETDump takes a few) before it is killed.
BUILD_LIMIT_S = 120.0
BAD = ("ESCAPE", "TIMEOUT", "MEMORY", "MODIFIED", "CANARY", "CRASH", "MUTATOR")


class _Worker:
    def __init__(self, ctx: Any, seeds: list[Any], max_tasks: int, kill_after: float, log: str) -> None:
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=worker_loop, args=(child, seeds, max_tasks, kill_after * 0.8, log), daemon=True)
        self.proc.start()
        child.close()
        self.task: tuple[Any, ...] | None = None
        self.started = 0.0
        self.building = False  # making the mutant (the fuzzer's time, not numdiff's)
        self.done = 0
        self.max_tasks = max_tasks

    def send(self, task: tuple[Any, ...]) -> None:
        self.task, self.started, self.building = task, time.monotonic(), True
        self.conn.send(task)

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)
        self.conn.close()


def _plan(n: int, kinds: list[str], seeds: list[Any], seed: int, gap_fraction: float,
          work: Path) -> list[tuple[Any, ...]]:
    rng = random.Random(seed)
    per_kind = {k: seeds_for(k, seeds) for k in kinds}
    tasks = []
    for case in range(n):
        kind = kinds[case % len(kinds)]
        s = rng.choice(per_kind[kind])
        tasks.append((case, kind, s.name, rng.getrandbits(63), rng.random() < gap_fraction, str(work / f"c{case}")))
    return tasks


def run_campaign(tasks: list[tuple[Any, ...]], seeds: list[Any], workers: int, max_tasks: int,
                 kill_after: float, log: str, progress: bool = True,
                 max_seconds: float | None = None) -> list[CaseResult]:
    ctx = mp.get_context("fork")
    pool = [_Worker(ctx, seeds, max_tasks, kill_after, log) for _ in range(workers)]
    pending = list(reversed(tasks))
    results: list[CaseResult] = []
    t0, last = time.monotonic(), time.monotonic()
    for w in pool:
        if pending:
            w.send(pending.pop())
    while any(w.task is not None for w in pool):
        ready = wait([w.conn for w in pool if w.task is not None], timeout=0.5)
        for i, w in enumerate(pool):
            if w.task is None:
                continue
            task = w.task
            res: dict[str, Any] | None = None
            dead = False
            if w.conn in ready:
                try:
                    res = w.conn.recv()
                except (EOFError, OSError):
                    dead = True
                if res == STARTED:  # the mutant is built and written: the case's own time starts now
                    w.started, w.building = time.monotonic(), False
                    continue
            elif w.building and time.monotonic() - w.started > BUILD_LIMIT_S:
                res = CaseResult(task[0], task[1], task[2], "", "MUTATOR",
                                 detail=f"building the mutant took over {BUILD_LIMIT_S:g} s",
                                 wall=time.monotonic() - w.started, case_dir=task[5]).__dict__
                dead = True
            elif not w.building and time.monotonic() - w.started > kill_after:
                res = CaseResult(task[0], task[1], task[2], "", "TIMEOUT", detail=f"killed after {kill_after:g} s",
                                 wall=time.monotonic() - w.started, case_dir=task[5]).__dict__
                dead = True
            elif not w.proc.is_alive() and not w.conn.poll():
                dead = True
            if dead and res is None:
                res = CaseResult(task[0], task[1], task[2], "", "CRASH",
                                 detail=f"worker exit code {w.proc.exitcode}", case_dir=task[5]).__dict__
            if res is None:
                continue
            results.append(CaseResult(**res))
            if res["outcome"] not in BAD:  # only reproducers are kept: 100,000 cases would fill the disk
                shutil.rmtree(task[5], ignore_errors=True)
            w.task = None
            w.done += 1
            if dead or res.get("recycle") or w.done >= w.max_tasks:
                w.kill()
                pool[i] = w = _Worker(ctx, seeds, max_tasks, kill_after, log)
            if max_seconds is not None and time.monotonic() - t0 > max_seconds:
                pending.clear()  # out of time: finish the cases in flight, start no more
            if pending:
                w.send(pending.pop())
        if progress and time.monotonic() - last > 30:
            last = time.monotonic()
            rate = len(results) / (last - t0)
            print(f"  {len(results)}/{len(tasks)} cases, {rate:.1f}/s, "
                  f"{sum(r.outcome in BAD for r in results)} bad so far", file=sys.stderr, flush=True)
    for w in pool:
        try:
            w.conn.send(None)
        except OSError:
            pass
        w.kill()
    return results


def _recheck_timeouts(results: list[CaseResult], tasks: dict[int, tuple[Any, ...]], seeds: list[Any]) -> int:
    """Re-run each TIMEOUT alone in a fresh worker; returns how many took over 2 s again."""
    again = [r for r in results if r.outcome == "TIMEOUT"]
    if not again:
        return 0
    rerun = run_campaign([tasks[r.case][:5] + (tasks[r.case][5] + "-rerun",) for r in again], seeds, 1, 1,
                         kill_after=10.0, log=os.devnull, progress=False)
    by_case = {r.case: r for r in rerun}
    confirmed = 0
    for r in again:
        r2 = by_case.get(r.case)
        if r2 is not None and r2.outcome == "TIMEOUT":
            confirmed += 1
        else:
            r.message = (r.message + " " if r.message else "") + f"[not reproduced alone: {r2.wall if r2 else 0:.2f} s]"
        shutil.rmtree(tasks[r.case][5] + "-rerun", ignore_errors=True)
    return confirmed


def _table(rows: list[list[Any]], headers: list[str]) -> str:
    cells = [[str(c) for c in row] for row in [headers, *rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def summarize(results: list[CaseResult], kinds: list[str], elapsed: float, workers: int, gap_fraction: float,
              timeouts_confirmed: int, out: Path, planned: int = 0) -> str:
    stopped = f" (time limit reached: {planned - len(results)} of {planned} planned not run)" \
        if planned > len(results) else ""
    lines = [f"numdiff fuzz campaign: {len(results)} mutants{stopped} in {elapsed:.0f} s on {workers} workers "
             f"({len(results) / max(elapsed, 1e-9):.1f} mutants/s)",
             f"each case: Inspector, to_dataframe, print_data_tabular; calculate_numeric_gap('SNR') on a sampled "
             f"{gap_fraction:.0%} of the cases with ETRecord + debug buffer "
             f"({sum(r.gap_run for r in results)} cases ran the gap)", ""]
    outcomes = ["ok", "error", *BAD]
    rows = []
    for kind in kinds:
        c = Counter(r.outcome for r in results if r.kind == kind)
        rows.append([kind, sum(c.values()), *(c.get(o, 0) for o in outcomes)])
    c = Counter(r.outcome for r in results)
    rows.append(["total", len(results), *(c.get(o, 0) for o in outcomes)])
    lines += [_table(rows, ["kind", "mutants", *outcomes]), ""]
    errors = Counter(r.detail for r in results if r.outcome == "error")
    lines += ["NumdiffError classes: " + (", ".join(f"{k} {v}" for k, v in errors.most_common()) or "none"), ""]
    sigs: dict[tuple[str, str], list[CaseResult]] = defaultdict(list)
    for r in results:
        if r.outcome in ("ESCAPE", "MEMORY", "CRASH", "MUTATOR", "MODIFIED", "CANARY"):
            sigs[(f"{r.outcome} {r.detail}", r.frame)].append(r)
    lines.append(f"distinct escape signatures: {len(sigs)}")
    if sigs:
        rows = [[len(v), k[0], k[1] or "-", v[0].message.replace("\n", " ")[:90], _saved(out, v[0])]
                for k, v in sorted(sigs.items(), key=lambda kv: -len(kv[1]))]
        lines.append(_table(rows, ["count", "outcome/type", "numdiff frame", "message (first case)", "reproducer"]))
    n_to = sum(r.outcome == "TIMEOUT" for r in results)
    lines += ["", f"TIMEOUT cases: {n_to} ({timeouts_confirmed} still over 2 s when re-run alone)", ""]
    slow = sorted(results, key=lambda r: -r.wall)[:5]
    lines += ["slowest 5 cases:", _table([[f"{r.wall:.2f} s", r.outcome, r.kind, r.seed, r.strategy[:60], r.stage]
                                          for r in slow], ["wall", "outcome", "kind", "seed", "strategy", "stage"]), ""]
    big = sorted(results, key=lambda r: -r.growth)[:5]
    lines += ["largest memory 5 cases (peak RSS growth during the case):",
              _table([[f"{r.growth / 2**20:.0f} MiB", f"{r.file_bytes / 2**10:.0f} KiB", r.outcome, r.kind, r.seed,
                       r.strategy[:60]] for r in big], ["growth", "files", "outcome", "kind", "seed", "strategy"])]
    return "\n".join(lines)


def _saved(out: Path, r: CaseResult) -> str:
    return str(out / f"{r.outcome.lower()}-{r.case}")


def replay(case_dir: Path) -> int:
    """Run a saved case in this process and show what happens (traceback included)."""
    import traceback

    from fuzz._worker import run_files

    _warm_up(2)  # lazily imported torch code is not what we time
    files = {role: case_dir / name for role, name in FILENAMES.items() if (case_dir / name).is_file()}
    print((case_dir / "case.txt").read_text().strip() if (case_dir / "case.txt").is_file() else case_dir)
    t0 = time.perf_counter()
    try:
        stage = run_files(files["etdump"], files.get("etrecord"), files.get("debug_buffer"), gap=True)
        print(f"ok (reached {stage}) in {time.perf_counter() - t0:.2f} s")
        return 0
    except Exception:  # noqa: BLE001 - show everything
        traceback.print_exc()
        print(f"after {time.perf_counter() - t0:.2f} s")
        return 1


def _warm_up(per_kind: int) -> None:
    """Import everything a case touches and build the bombs here, once: forked workers inherit it all.

    torch and pandas import many submodules lazily, on first use; a worker that had to do that itself
    would spend seconds on its first case (and every replacement worker would again)."""
    import warnings

    from fuzz._etrecord_mut import warm_bombs
    from fuzz._worker import run_files
    from fuzz.mutators import make_mutant
    from numdiff.errors import NumdiffError

    seeds = find_seeds()
    example = next(s for s in seeds if s.name == "quantized_mlp")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run_files(example.etdump, example.etrecord, example.debug_buffer, gap=True)
        for seed in seeds[:3]:
            try:
                run_files(seed.etdump, seed.etrecord, seed.debug_buffer, gap=True)
            except NumdiffError:
                pass
    import importlib

    for name in ("torch.export", "torch._export.serde.serialize", "torch.onnx"):  # the deserializer's error paths
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - only a warm-up
            pass
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(per_kind * len(KINDS)):  # a few mutants of each kind reach more lazily imported code
            mutant = make_mutant(KINDS[i % len(KINDS)], example, i, f"{tmp}/canary", seeds)
            paths = {}
            for role, data in mutant.files.items():
                paths[role] = Path(tmp) / FILENAMES[role]
                paths[role].write_bytes(data)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    run_files(paths["etdump"], paths.get("etrecord"), paths.get("debug_buffer"), gap=True)
            except Exception:  # noqa: BLE001 - only a warm-up; the campaign classifies these properly
                pass
    warm_bombs()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mutants", type=int, default=2000, help="number of mutants (default 2000)")
    p.add_argument("--kinds", default=",".join(KINDS), help="comma-separated: " + ",".join(KINDS))
    p.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the campaign (default 0)")
    p.add_argument("--out", default="/tmp/fuzz-repro", help="where reproducers and summary go (default /tmp/fuzz-repro)")
    p.add_argument("--gap-fraction", type=float, default=0.2,
                   help="fraction of cases that also run calculate_numeric_gap (default 0.2)")
    p.add_argument("--max-tasks", type=int, default=1000, help="cases per worker before it is replaced")
    p.add_argument("--kill-after", type=float, default=8.0, help="kill a case's worker after this many seconds")
    p.add_argument("--warm-up", type=int, default=12,
                   help="mutants of each kind run in the parent before forking, to import lazily loaded code")
    p.add_argument("--max-seconds", type=float, default=None,
                   help="stop starting new cases after this long; the summary covers the cases run")
    p.add_argument("--replay", metavar="DIR", help="re-run one saved case directory in-process")
    args = p.parse_args(argv)
    if args.replay:
        return replay(Path(args.replay))
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    if not kinds or any(k not in KINDS for k in kinds):
        p.error(f"--kinds takes {','.join(KINDS)}")
    print("warming up (imports, one case of each kind, zip bombs) ...", file=sys.stderr, flush=True)
    _warm_up(args.warm_up)

    out = Path(args.out)
    work = out / f".work-{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    seeds = find_seeds()
    tasks = _plan(args.mutants, kinds, seeds, args.seed, args.gap_fraction, work)
    print(f"fuzzing {args.mutants} mutants of {len(seeds)} seeds ({','.join(kinds)}) on {args.workers} workers",
          file=sys.stderr, flush=True)
    t0 = time.monotonic()
    results = run_campaign(tasks, seeds, args.workers, args.max_tasks, args.kill_after,
                           log=str(out / "worker-stderr.log"), max_seconds=args.max_seconds)
    elapsed = time.monotonic() - t0
    confirmed = _recheck_timeouts(results, {t[0]: t for t in tasks}, seeds)
    for r in results:
        src = Path(r.case_dir)
        if r.outcome in BAD and src.is_dir():
            dst = Path(_saved(out, r))
            shutil.rmtree(dst, ignore_errors=True)
            shutil.move(str(src), dst)
            with open(dst / "case.txt", "a") as f:
                f.write(json.dumps(r.__dict__) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    text = summarize(results, kinds, elapsed, args.workers, args.gap_fraction, confirmed, out, planned=len(tasks))
    (out / "summary.txt").write_text(text + "\n")
    with open(out / "results.jsonl", "w") as f:
        for r in results:
            if r.outcome != "ok":
                f.write(json.dumps(r.__dict__) + "\n")
    print(text)
    return 1 if any(r.outcome in BAD for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
