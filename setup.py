"""Build numdiff's one compiled module; everything else is in pyproject.toml.

``numdiff.comparators._sums`` computes the metrics' difference sums in one pass (see its source).
It is optional: where no C compiler is found the build goes on without it, and numdiff computes
the same sums with numpy (about 3x slower;
``numdiff.comparators.numerics.sums_kernel()`` says which one is in use, and the benchmarks print it).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("numdiff.comparators._sums", ["numdiff/comparators/_sums.c"], optional=True)])
