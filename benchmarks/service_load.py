"""Load test of the numdiff service on loopback: concurrent uploads and status/result requests.

    python benchmarks/service_load.py                       # 200 uploads, 1,000 requests, SQLite, 64 threads
    python benchmarks/service_load.py --db postgresql://...  # the same against PostgreSQL
    python benchmarks/service_load.py --uploads 40 --requests 200 --workers 2
    git worktree add --detach /tmp/numdiff-301293c 301293c   # the code before issue 22's defences
    python benchmarks/service_load.py --baseline-tree /tmp/numdiff-301293c --rounds 3 --uploads 40 --requests 200

Starts ``numdiff serve`` on a free 127.0.0.1 port with a fresh data directory, creates a token,
then (1) measures one run end to end and the library alone (``Analysis.from_files`` +
``render_html`` in this process, warm) to show what the service adds; (2) fires ``--uploads``
uploads of the bundled example at once (``--concurrency`` threads) while ``--requests``
status/result requests run alongside; (3) waits (bounded by ``--timeout``) until every run is
analysed, and checks every stored analysis: status done, SNR rows and culprit ops equal to the
library's. Prints p50/p99 latency per request kind and of the whole API, request throughput,
analyses per minute. Stops by itself; exits 1 if any analysis is missing or wrong, or the deadline
passes.

``--baseline-tree DIR`` compares with another checkout of numdiff (e.g. a git worktree of the
commit before a change): each round runs the same load (``--rounds``, overhead figure left out)
against a server of this tree and then one started from DIR (``PYTHONPATH=DIR``: its serve, its
workers and its ``admin create-token``), and prints the medians of analyses per minute and API
p99 side by side. The client, the files and the checks are this tree's for both.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def _number(v: float | None) -> str | None:
    """A gap value as comparable text; None where there is no number (the API's null, inf, nan)."""
    return None if v is None or not math.isfinite(float(v)) else repr(float(v))


def _snr_rows(rows: list[Any]) -> list[tuple[Any, ...]]:
    return [(tuple(r["aot_ops"]), tuple(r["runtime_ops"]), tuple(_number(v) for v in r["gap"])) for r in rows]


def run_load(url: str, token: str, uploads: int, requests: int, concurrency: int, timeout: float) -> dict[str, Any]:
    """Fire the load at a running server; returns figures and the list of problems found (empty when all is well)."""
    import httpx

    from numdiff.client import Client
    from numdiff.examples import example_files
    from numdiff.report import Analysis

    ex = example_files()
    ref = Analysis.from_files(ex.etdump, ex.etrecord, ex.debug_buffer)
    assert ref.gap is not None
    expected_rows = [(tuple(r.aot_ops), tuple(r.runtime_ops), tuple(_number(v) for v in r.snr)) for r in ref.gap.rows]
    expected_culprits = [tuple(r.aot_ops) for r in ref.culprits.rows]

    lat: dict[str, list[float]] = {"upload": [], "status": [], "result": []}
    lock = threading.Lock()
    ids: list[int] = []
    problems: list[str] = []
    local = threading.local()

    def client() -> Client:
        if not hasattr(local, "c"):
            local.c = Client(url, token, timeout=120)
        c: Client = local.c
        return c

    def upload(i: int) -> None:
        t = time.perf_counter()
        try:
            run = client().submit("load", ex.etrecord, ex.etdump, ex.debug_buffer, {"device": f"dev{i % 8}", "i": str(i)})
        except Exception as e:  # noqa: BLE001 - a benchmark records failures instead of stopping
            with lock:
                problems.append(f"upload {i}: {type(e).__name__}: {e}")
            return
        with lock:
            lat["upload"].append(time.perf_counter() - t)
            ids.append(int(run["id"]))

    def status(j: int) -> None:
        with lock:
            known = list(ids)
        kind = "result" if j % 4 == 3 else "status"
        t = time.perf_counter()
        try:
            if not known:
                client().runs(model="load", limit=20)
            elif kind == "status":
                client().run(known[j % len(known)])
            else:
                client().result(known[j % len(known)])
        except Exception as e:  # noqa: BLE001
            with lock:
                problems.append(f"request {j}: {type(e).__name__}: {e}")
            return
        with lock:
            lat[kind].append(time.perf_counter() - t)

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        futures = [pool.submit(upload, i) for i in range(uploads)]
        futures += [pool.submit(status, j) for j in range(requests)]
        for f in futures:
            f.result()
    requests_done = time.perf_counter()

    deadline = time.monotonic() + timeout
    pending = set(ids)
    with Client(url, token) as c:
        while pending and time.monotonic() < deadline:
            for rid in list(pending):
                if c.run(rid)["status"] in ("done", "failed"):
                    pending.discard(rid)
            if pending:
                time.sleep(0.5)
        analysed = time.perf_counter()
        if pending:
            problems.append(f"{len(pending)} run(s) not analysed within {timeout:g} s: {sorted(pending)[:10]}")
        for rid in sorted(set(ids) - pending):
            res = c.result(rid)
            if res["status"] != "done":
                problems.append(f"run {rid}: {res['status']}: {res.get('reason')}")
                continue
            if _snr_rows(res["gap"] or []) != expected_rows:
                problems.append(f"run {rid}: SNR rows differ from the library's")
            if [tuple(r["aot_ops"]) for r in res["culprits"] or []] != expected_culprits:
                problems.append(f"run {rid}: culprit rows differ from the library's")
            saved = c.analysis(rid)
            if saved["labels"].get("i") is None or res["labels"]["i"] != saved["labels"]["i"]:
                problems.append(f"run {rid}: the stored analysis is not this run's")
        r = httpx.get(url + "/healthz", timeout=10)
        if r.status_code != 200:
            problems.append(f"/healthz answered {r.status_code} after the load")
    n_requests = sum(len(v) for v in lat.values())
    every = [x for v in lat.values() for x in v]
    figures: dict[str, Any] = {
        "uploads": uploads, "uploads_ok": len(ids), "requests": requests,
        "latency_ms": {k: {"p50": 1000 * _pct(v, 50), "p99": 1000 * _pct(v, 99), "n": len(v)} for k, v in lat.items()},
        "api_ms": {"p50": 1000 * _pct(every, 50), "p99": 1000 * _pct(every, 99), "n": len(every)},
        "request_throughput_per_s": n_requests / max(requests_done - started, 1e-9),
        "analyses_per_min": 60 * len(set(ids) - pending) / max(analysed - started, 1e-9),
        "wall_s": analysed - started, "problems": problems,
    }
    return figures


def overhead(url: str, token: str, folder: Path | None = None, repeat: int = 7) -> dict[str, Any]:
    """Median seconds per run: the library alone (warm, in this process) vs one run through the idle service.

    ``folder`` holds ``etdump.etdp``, ``etrecord.bin`` and ``debug_buffer.bin`` (default: the bundled example).
    Both sides are warmed up first (one run each: the library in this process, the service's worker
    and its runner). Each service run uploads fresh bytes of the debug buffer (one byte appended),
    so nothing is deduplicated.
    """
    from numdiff.client import Client
    from numdiff.examples import example_files
    from numdiff.report import Analysis, render_html

    if folder is None:
        ex = example_files()
        etdump, etrecord, buffer, name = Path(ex.etdump), Path(ex.etrecord), Path(ex.debug_buffer), "bundled example"
    else:
        etdump, etrecord, buffer, name = folder / "etdump.etdp", folder / "etrecord.bin", folder / "debug_buffer.bin", folder.name
    render_html(Analysis.from_files(etdump, etrecord, buffer))  # warm, as a long-running process would be
    lib, svc = [], []
    with tempfile.TemporaryDirectory(prefix="numdiff-overhead-") as tmp, Client(url, token) as c:
        c.wait(c.submit("overhead", etrecord, etdump, buffer, {"warm-up": "1"})["id"], poll=0.05)  # the same for the service
        for i in range(repeat):
            t = time.perf_counter()
            render_html(Analysis.from_files(etdump, etrecord, buffer))
            lib.append(time.perf_counter() - t)
            fresh = Path(tmp) / f"buffer{i}.bin"
            fresh.write_bytes(buffer.read_bytes() + bytes([i]))
            t = time.perf_counter()
            run = c.wait(c.submit("overhead", etrecord, etdump, fresh, {"i": str(i)})["id"], poll=0.05)
            svc.append(time.perf_counter() - t)
            if os.environ.get("NUMDIFF_BENCH_DEBUG"):
                import datetime as _dt
                span = (_dt.datetime.fromisoformat(run["finished"]) - _dt.datetime.fromisoformat(run["created"])).total_seconds()
                print(f"    lib {lib[-1]:.3f} svc {svc[-1]:.3f} server {span:.3f} stages "
                      f"{[j['elapsed_ms'] for j in run['jobs']]}", flush=True)
            if run["status"] != "done":
                raise RuntimeError(f"overhead run {run['id']} {run['status']}: {run.get('reason')}")
    lib_s, svc_s = statistics.median(lib), statistics.median(svc)
    return {"model": name, "library_s": lib_s, "service_end_to_end_s": svc_s, "added_s": svc_s - lib_s,
            "added_pct": 100 * (svc_s - lib_s) / lib_s}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uploads", type=int, default=200)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=64, help="client threads, each with its own connection "
                        "(default 64: the server closes connections past NUMDIFF_SERVICE_MAX_CONNECTIONS_PER_CLIENT, "
                        "100, from one address, and this load comes from one)")
    parser.add_argument("--workers", type=int, default=2, help="analysis workers of the server (default 2)")
    parser.add_argument("--db", default=None, help="database URL (default: SQLite in a fresh data directory)")
    parser.add_argument("--postgres", action="store_true",
                        help="start a throw-away PostgreSQL cluster on loopback (Debian's packages, as the tests do) "
                        "and use it")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds to wait for all analyses (default 1800)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--overhead-on", type=Path, action="append", default=None, metavar="DIR",
                        help="fixture folder(s) for the overhead figure (default: the bundled example and "
                        "tests/fixtures/realistic/real_lstm_gru)")
    parser.add_argument("--overhead-only", action="store_true", help="measure the overhead only, no load")
    parser.add_argument("--no-overhead", action="store_true", help="the load only, no overhead figure")
    parser.add_argument("--baseline-tree", type=Path, default=None, metavar="DIR",
                        help="also load a server run from this checkout of numdiff, round after round, and compare")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each side with --baseline-tree (default 3)")
    args = parser.parse_args(argv)

    from tests.service._server import postgres

    with contextlib.ExitStack() as stack:
        if args.postgres:
            args.db = stack.enter_context(postgres())
        if args.baseline_tree is not None:
            return _compare(args)
        return _run(args)


@contextlib.contextmanager
def serving(args: argparse.Namespace, tree: Path | None = None) -> Iterator[tuple[str, str]]:
    """A fresh ``numdiff serve`` on loopback and a token for it: ``(url, token)``.

    ``tree``: run the server, its workers and ``admin create-token`` from that checkout (``PYTHONPATH``);
    None for this one. The token comes from the command line either way, as the README makes one.
    """
    from tests.service._server import running

    env = {"NUMDIFF_SERVICE_MAX_UPLOAD_MB": "64"}
    if tree is not None:
        env["PYTHONPATH"] = str(tree.resolve())
    with tempfile.TemporaryDirectory(prefix="numdiff-load-") as tmp, \
            running(Path(tmp) / "data", args.db, workers=args.workers, **env) as server:
        cmd = [sys.executable, "-m", "numdiff", "admin", "create-token", "--data", str(server.data),
               "--project", "load"] + (["--db", args.db] if args.db else [])
        made = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env={**os.environ, **env}, check=False)
        if made.returncode != 0:
            raise RuntimeError(f"admin create-token failed ({made.returncode}): {made.stderr.strip()[-500:]}")
        yield server.url, made.stdout.strip().splitlines()[-1]


def _run(args: argparse.Namespace) -> int:
    with serving(args) as (url, token):
        folders = args.overhead_on or [None, REPO / "tests" / "fixtures" / "realistic" / "real_lstm_gru"]
        over = [] if args.no_overhead else [overhead(url, token, folder) for folder in folders]
        figures = ({"problems": [], "uploads_ok": 0} if args.overhead_only else
                   run_load(url, token, args.uploads, args.requests, args.concurrency, args.timeout))
        figures["overhead"] = over
    if args.json:
        print(json.dumps(figures, indent=1))
    else:
        for o in figures["overhead"]:
            print(f"  one run of {o['model']}: library alone {o['library_s']:.2f} s, through the idle service "
                  f"{o['service_end_to_end_s']:.2f} s (+{o['added_s']:.2f} s, {o['added_pct']:+.0f}%: upload, queue, "
                  "fork, store, polling)")
        if args.overhead_only:
            return 0
        print(f"service load on {os.cpu_count()} CPUs, {args.workers} workers, "
              f"{'PostgreSQL' if args.db else 'SQLite'}: {figures['uploads_ok']}/{args.uploads} uploads, "
              f"{args.requests} status/result requests, {args.concurrency} client threads")
        for kind, f in figures["latency_ms"].items():
            print(f"  {kind:7s} p50 {f['p50']:8.1f} ms   p99 {f['p99']:8.1f} ms   (n={f['n']})")
        api = figures["api_ms"]
        print(f"  API     p50 {api['p50']:8.1f} ms   p99 {api['p99']:8.1f} ms   (n={api['n']}, every request)")
        print(f"  request throughput {figures['request_throughput_per_s']:.1f} req/s; "
              f"analyses {figures['analyses_per_min']:.1f} per minute; all done in {figures['wall_s']:.1f} s")
        for p in figures["problems"][:20]:
            print("  PROBLEM:", p)
        print("OK: every analysis stored and correct" if not figures["problems"] else "FAILED")
    return 0 if not figures["problems"] else 1


def _revision(tree: Path) -> str:
    done = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          check=False)
    return done.stdout.strip() or "?"


def _compare(args: argparse.Namespace) -> int:
    """Rounds of the same load against this tree's server and the baseline tree's, alternating; medians."""
    sides = {"current": None, "baseline": args.baseline_tree}
    rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in sides}
    for _ in range(args.rounds):
        for name, tree in sides.items():
            with serving(args, tree) as (url, token):
                rounds[name].append(run_load(url, token, args.uploads, args.requests, args.concurrency,
                                             args.timeout))
    summary: dict[str, Any] = {"uploads": args.uploads, "requests": args.requests, "concurrency": args.concurrency,
                               "workers": args.workers, "db": "PostgreSQL" if args.db else "SQLite",
                               "rounds": args.rounds, "cpus": os.cpu_count(), "sides": {}}
    for name, tree in sides.items():
        runs = rounds[name]
        summary["sides"][name] = {
            "tree": str((tree or REPO).resolve()), "revision": _revision(tree or REPO),
            "analyses_per_min": [r["analyses_per_min"] for r in runs],
            "api_p99_ms": [r["api_ms"]["p99"] for r in runs], "api_p50_ms": [r["api_ms"]["p50"] for r in runs],
            "median_analyses_per_min": statistics.median(r["analyses_per_min"] for r in runs),
            "median_api_p99_ms": statistics.median(r["api_ms"]["p99"] for r in runs),
            "problems": [p for r in runs for p in r["problems"]]}
    cur, base = summary["sides"]["current"], summary["sides"]["baseline"]
    summary["analyses_per_min_change_pct"] = 100 * (cur["median_analyses_per_min"] / base["median_analyses_per_min"] - 1)
    summary["api_p99_change_ms"] = cur["median_api_p99_ms"] - base["median_api_p99_ms"]
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        print(f"service load, {summary['db']}, {args.workers} workers, {os.cpu_count()} CPUs: {args.uploads} uploads "
              f"of the bundled example and {args.requests} status/result requests from {args.concurrency} threads, "
              f"{args.rounds} round(s) per side, alternating")
        for name, side in summary["sides"].items():
            print(f"  {name:8s} {side['revision']:>9s}  analyses/min median {side['median_analyses_per_min']:7.1f} "
                  f"({', '.join(f'{v:.1f}' for v in side['analyses_per_min'])})   API p99 median "
                  f"{side['median_api_p99_ms']:7.1f} ms ({', '.join(f'{v:.0f}' for v in side['api_p99_ms'])})")
        print(f"  current vs baseline: analyses/min {summary['analyses_per_min_change_pct']:+.1f}%, "
              f"API p99 {summary['api_p99_change_ms']:+.1f} ms")
        for p in (cur["problems"] + base["problems"])[:20]:
            print("  PROBLEM:", p)
    return 0 if not cur["problems"] and not base["problems"] else 1


if __name__ == "__main__":
    sys.exit(main())
