"""Headless Chromium driven by Selenium, for the report tests (Debian's chromium + chromium-driver)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROME_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
                "--window-size=1400,1000")


def _find(*names: str) -> str | None:
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    return None


def need_browser() -> tuple[str, str]:
    """Paths of chromium and chromedriver; skip the test when absent (fail under CI=true)."""
    chromium = _find("chromium", "chromium-browser")
    driver = _find("chromedriver")
    try:
        import selenium  # noqa: F401
    except ImportError:
        chromium = None
    if chromium and driver:
        return chromium, driver
    why = ("chromium, chromedriver or selenium is missing (run scripts/install_test_system_deps.sh as root "
           "and pip install -e '.[test]')")
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(why + " and CI=true: the browser tests must run in CI")
    pytest.skip(why)


@contextmanager
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, driver_path = need_browser()
    profile = tempfile.mkdtemp(prefix="numdiff-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in CHROME_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def screenshots(kind: str) -> Path:
    """Where a test saves what a person would see (``test-output/<kind>``, or under NUMDIFF_TEST_OUTPUT)."""
    return Path(os.environ.get("NUMDIFF_TEST_OUTPUT", Path(__file__).resolve().parents[2] / "test-output")) / kind
