"""Build numdiff's one compiled module; everything else is in pyproject.toml.

``numdiff.comparators._sums`` computes the metrics' difference sums in one pass (see its source).
It is optional: where no C compiler is found the build goes on without it, and numdiff computes
the same sums with numpy (about 2.5x slower, benchmarks/metric_sums.py;
``numdiff.comparators.numerics.sums_kernel()`` says which one is in use, and the benchmarks print it).
"""

import hashlib
import sys
from pathlib import Path

from setuptools import Extension, setup

# No contraction of a*b+c into one fused multiply-add: GCC contracts by default wherever the target has
# FMA (aarch64, or x86 with CFLAGS=-march=native), which would round the sums differently from numpy's.
_NO_FMA = [] if sys.platform == "win32" else ["-ffp-contract=off"]

# The module carries its source's digest: an editable install keeps an old build next to a newer _sums.c
# until pip runs again, and tests/comparators/test_native_sums.py then says so.
_SOURCE = "numdiff/comparators/_sums.c"
_DIGEST = hashlib.sha256(Path(__file__).parent.joinpath(_SOURCE).read_bytes()).hexdigest()

setup(ext_modules=[Extension("numdiff.comparators._sums", [_SOURCE], optional=True, extra_compile_args=_NO_FMA,
                             define_macros=[("NUMDIFF_SUMS_SOURCE_SHA256", f'"{_DIGEST}"')])])
