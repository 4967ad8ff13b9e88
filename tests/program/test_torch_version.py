"""A torch older than numdiff's range is refused by name, not with an AttributeError deep in the builder."""

from __future__ import annotations

import re

import pytest

from numdiff.errors import UsageError
from numdiff.program._build import require_supported_torch


@pytest.mark.parametrize("version", ["2.8.0", "2.8.0+cu128", "2.5.1", "1.13.1"])
def test_older_torch_is_refused_with_what_to_install(version: str) -> None:
    with pytest.raises(UsageError, match=rf"torch 2.9 or newer; this environment has torch {re.escape(version)}\n"
                                         r"Install a tested torch: pip install 'torch>=2.9.1,<2.16'"):
        require_supported_torch(version)


@pytest.mark.parametrize("version", ["2.9.1", "2.9.1+cu128", "2.13.0+cpu", "2.14.1", "2.15.0", "2.16.0.dev20261101", "3.0.0"])
def test_supported_and_newer_torch_pass(version: str) -> None:
    require_supported_torch(version)
