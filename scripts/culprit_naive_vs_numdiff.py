"""How often naive strategies on the gap table find the planted op, vs ``find_culprits``.

    .venv/bin/python scripts/culprit_naive_vs_numdiff.py [--db 30]

On every known-truth fixture (tests/fixtures/culprit_*/truth.json, written by
scripts/make_culprit_fixtures.py), three strategies name the op(s) to blame:

* **worst accumulated**: the row of ``calculate_numeric_gap("SNR")`` with the lowest SNR;
* **first below N dB**: the first row (execution order) whose SNR is below ``--db``;
* **find_culprits**: ``report.culprits``.

A strategy is *right* on a fixture when it names every planted site and nothing else (on a clean
fixture: when it names nothing; "worst accumulated" always names a row, so it is never right on a
clean one). Prints a Markdown table with totals for planted and clean fixtures.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from numdiff import Inspector  # noqa: E402


def _snr(gap: Any) -> float:
    values = [float(g) for g in (gap if isinstance(gap, (list, tuple)) else [gap])]
    return min(values) if values and not any(math.isnan(v) for v in values) else -math.inf


def _judge(picked: list[list[str]], planted: list[set[str]]) -> tuple[bool, int]:
    hits = sum(1 for site in planted if any(site & set(ops) for ops in picked))
    extra = sum(1 for ops in picked if not any(site & set(ops) for site in planted))
    return hits == len(planted) and extra == 0, hits


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=float, default=30.0, help="threshold of 'first below N dB' (default 30)")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    header = ["fixture", "planted", "worst accumulated", f"first below {args.db:g} dB", "find_culprits"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    totals = {(k, clean): 0 for k in ("worst", "first", "numdiff") for clean in (False, True)}
    counts = {False: 0, True: 0}
    for d in sorted((REPO / "tests" / "fixtures").glob("culprit_*")):
        truth = json.loads((d / "truth.json").read_text())
        planted = [set(p["aot_ops"]) for p in truth["planted"]]
        ins = Inspector(etdump_path=d / "etdump.etdp", etrecord=str(d / "etrecord.bin"),
                        debug_buffer_path=d / "debug_buffer.bin")
        gap = ins.calculate_numeric_gap("SNR")
        snr = [_snr(g) for g in gap["gap"]]
        ops = [list(o) for o in gap["aot_ops"]]
        worst = [ops[min(range(len(snr)), key=lambda i: snr[i])]]  # always names a row, even on clean models
        below = [i for i, s in enumerate(snr) if s < args.db]
        first = [ops[below[0]]] if below else []
        found = [r.aot_ops for r in ins.find_culprits("SNR").culprits]
        cells = []
        for key, picked in (("worst", worst), ("first", first), ("numdiff", found)):
            right, _ = _judge(picked, planted)
            totals[(key, not planted)] += right
            cells.append(("right" if right else "WRONG") + ": " + ("; ".join(",".join(p) for p in picked) or "none"))
        counts[not planted] += 1
        name = ", ".join(sorted(o for s in planted for o in s)) or "(clean)"
        print(f"| {d.name} | {name} | " + " | ".join(cells) + " |")
    for clean, label in ((False, "planted"), (True, "clean")):
        n = counts[clean]
        print(f"| **right, {label}** | {n} fixtures | " + " | ".join(
            f"{totals[(k, clean)]}/{n}" for k in ("worst", "first", "numdiff")) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
