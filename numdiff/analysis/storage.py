"""Reading and writing analysis files as functions (the same as :meth:`Analysis.load` and :meth:`Analysis.save`).

The file format and its migrations are in :mod:`numdiff.analysis.migrations`; this module keeps
``load_analysis``/``save_analysis`` for callers that prefer functions to methods.
"""

from __future__ import annotations

import os

from numdiff.analysis.migrations import MIGRATIONS, Migration, migrate
from numdiff.analysis.models import Analysis

__all__ = ["MIGRATIONS", "Migration", "load_analysis", "migrate", "save_analysis"]


def save_analysis(analysis: Analysis, path: str | os.PathLike[str]) -> None:
    """Write ``analysis`` to ``path`` as JSON (written beside it, then renamed over it)."""
    analysis.save(path)


def load_analysis(path: str | os.PathLike[str]) -> Analysis:
    """Read, migrate and validate an analysis file (see :meth:`Analysis.load`).

    Raises:
        AnalysisFileError: The file cannot be read, is not JSON, is from a newer numdiff or
            does not hold a valid analysis (the message names the first invalid fields).
    """
    return Analysis.load(path)
