"""The report tests' headless Chromium, one per test module."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.report._browser import browser, need_browser


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    """A headless Chromium (skipped without one; a failure under CI=true)."""
    need_browser()
    with browser() as d:
        yield d
