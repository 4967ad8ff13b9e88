"""Installs the numdiff shim at interpreter start when this folder is on PYTHONPATH (dev-only)."""

import numdiff_et_shim

numdiff_et_shim.install()
