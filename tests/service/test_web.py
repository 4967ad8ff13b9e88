"""The web pages in headless Chromium: sign in, project, model, comparison across devices, a run's report."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from numdiff.client import Client
from tests.report._browser import browser, need_browser
from tests.service._server import Server, submit_files

DEVICES = ("galaxy-s24", "pixel8", "pixel9")


def _wait(driver: Any, condition: Callable[[Any], Any]) -> Any:
    """Wait for a condition on the page a click navigated to (elements of the old page go stale)."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, 30, ignored_exceptions=(NoSuchElementException, StaleElementReferenceException)) \
        .until(condition)


def test_pages_in_headless_chromium(sqlite_server: Server, tmp_path: Path) -> None:
    need_browser()
    from selenium.webdriver.common.by import By

    token = sqlite_server.token("web")
    with Client(sqlite_server.url, token) as client:
        ids = [submit_files(client, model="quantized-mlp", device=d, build=str(100 + i))["id"]
               for i, d in enumerate(DEVICES)]
        assert all(client.wait(i)["status"] == "done" for i in ids)
    with browser() as driver:
        driver.get(sqlite_server.url + "/ui")
        assert driver.current_url.endswith("/ui/login")
        driver.find_element(By.NAME, "token").send_keys(token)
        driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        assert _wait(driver, lambda d: d.find_element(By.TAG_NAME, "h1").text == "Project web")
        driver.find_element(By.LINK_TEXT, "quantized-mlp").click()
        rows = _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#runs tr"))
        assert len(rows) == 1 + len(DEVICES)
        driver.find_element(By.LINK_TEXT, "device").click()
        headers = _wait(driver, lambda d: [th.text for th in d.find_elements(By.CSS_SELECTOR, "#compare tr:first-child th")])
        assert headers[1:1 + len(DEVICES)] == list(DEVICES)
        cells = driver.find_elements(By.CSS_SELECTOR, "#compare td.num")
        assert cells and all(re.fullmatch(r"[-0-9.∞—]+", c.text) for c in cells)
        shot = Path(os.environ.get("NUMDIFF_SCREENSHOT_DIR", tmp_path)) / "service-compare.png"
        driver.save_screenshot(str(shot))
        assert shot.stat().st_size > 10_000
        driver.get(f"{sqlite_server.url}/ui/runs/{ids[0]}")
        assert _wait(driver, lambda d: d.find_element(By.ID, "status").text == "done")
        stages = [[td.text for td in tr.find_elements(By.TAG_NAME, "td")[:2]]
                  for tr in driver.find_elements(By.CSS_SELECTOR, "#jobs tr")[1:]]
        assert stages == [["profile", "done"], ["gap", "done"], ["culprits", "done"], ["report", "done"]]
        driver.find_element(By.ID, "report-link").click()
        assert _wait(driver, lambda d: "galaxy-s24" in d.page_source)
        # nothing is loaded from another origin (no CDN)
        ours = 0
        for entry in driver.get_log("performance"):
            message = json.loads(entry["message"])["message"]
            params = message.get("params", {})
            if message.get("method") != "Network.requestWillBeSent" or \
                    not str(params.get("documentURL", "")).startswith(sqlite_server.url):
                continue  # the browser's own start-up requests
            ours += 1
            url = params["request"]["url"]
            assert url.startswith((sqlite_server.url, "data:", "about:")), url
        assert ours >= 5
        severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert not severe, severe
