"""numdiff: where a deployed PyTorch model's numbers go wrong, and what each op costs.

Reads the ETDump, debug buffer and ETRecord that ExecuTorch writes, without needing ExecuTorch.
``from numdiff import Inspector`` is a drop-in for ``from executorch.devtools import Inspector``.
"""

from __future__ import annotations

from numdiff.errors import NumdiffError

__all__ = ["NumdiffError"]
__version__ = "0.1.0"
