"""Unpickle the ETRecord's ``torch.save`` entries safely (tensors and plain containers only)."""

from __future__ import annotations

import io
from typing import Any

from numdiff.schema._graph_meta import ProgramLoadError

__all__ = ["load_torch_artifact"]


def load_torch_artifact(data: bytes, what: str) -> Any:
    """Unpickle a ``torch.save`` artifact with ``weights_only=True`` (never unsafe unpickling).

    Raises:
        ProgramLoadError: The bytes are not a weights-only loadable artifact.
    """
    if len(data) == 0:
        return None
    import torch

    try:
        return torch.load(io.BytesIO(data), weights_only=True)
    except Exception as e:
        raise ProgramLoadError(
            f"{what} cannot be loaded with torch.load(weights_only=True): {type(e).__name__}: {str(e)[:300]}",
            "numdiff never unpickles arbitrary code; regenerate the ETRecord with a current ExecuTorch "
            "(it stores tensors only).",
        ) from e
