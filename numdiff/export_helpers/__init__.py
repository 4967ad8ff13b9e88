"""Helpers used at export time, in the environment that has ExecuTorch (numdiff never imports them).

:mod:`numdiff.export_helpers.taps` writes the tap sidecar for ``find_culprits(taps=...)``.
"""
