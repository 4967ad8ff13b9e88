"""The metrics' difference sums: numdiff's compiled loop against its numpy path, on pairs shaped like
``run.py``'s gap case (160 float32 pairs of 2 MiB each, 320 MiB per side).

    .venv/bin/python benchmarks/metric_sums.py [--repeat 5] [--pairs 160]

Both paths sum the same in-memory pairs in this one process, alternating, one thread; printed: the
median seconds of each over ``--repeat`` rounds, their ratio (target: the compiled loop at least 2x
faster, README "How it is built" says about 3x) and the largest relative difference of their sums.
Exits 1 when the compiled module is not built or the target fails.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from numdiff.comparators import numerics


def _sums(pairs: list[tuple[torch.Tensor, torch.Tensor]]) -> list[tuple[float, float, float, int] | None]:
    return [numerics._difference_sums(a, b, False) for a, b in pairs]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--pairs", type=int, default=160)
    args = parser.parse_args(argv)
    native = numerics._native
    if native is None:
        print("numdiff.comparators._sums is not built (sums_kernel() = numpy): nothing to compare")
        return 1
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    pairs = []
    for _ in range(args.pairs):
        a = torch.randn(1, 8, 256, 256, generator=g)
        pairs.append((a, a + 1e-3 * torch.randn(a.shape, generator=g)))
    times: dict[str, list[float]] = {"native": [], "numpy": []}
    results = {}
    for _ in range(args.repeat):
        for name in times:
            numerics._native = native if name == "native" else None
            start = time.perf_counter()
            results[name] = _sums(pairs)
            times[name].append(time.perf_counter() - start)
    numerics._native = native
    med = {name: statistics.median(t) for name, t in times.items()}
    worst = max(abs(x[i] - y[i]) / abs(y[i]) for x, y in zip(results["native"], results["numpy"], strict=True)
                if x is not None and y is not None for i in (0, 1) if y[i])
    ratio = med["numpy"] / med["native"]
    print(f"{args.pairs} float32 pairs of {pairs[0][0].numel() * 4 / 2**20:.0f} MiB, one thread, median of {args.repeat}; "
          f"compiled loop: {numerics.sums_kernel()}")
    print(f"numpy {med['numpy']:.3f} s, compiled {med['native']:.3f} s: {ratio:.2f}x (target >= 2x): "
          f"{'PASS' if ratio >= 2 else 'FAIL'}; largest relative difference of the sums {worst:.1e}")
    assert np.isfinite(worst)
    return 0 if ratio >= 2 else 1


if __name__ == "__main__":
    raise SystemExit(main())
