"""Issue 22, item 14: the web pages' Content-Security-Policy allows no ``'unsafe-inline'`` and the pages still
look as they should under it in a real headless Chromium; the report inside the run page runs its script.

The pages' styles moved from inline ``<style>``/``style=""`` to one style sheet numdiff serves
(``/static/pages.css``); every answer but a report carries ``PAGE_CSP``; a report carries its sandboxing
policy and, inside, its own hash-based one.
"""

from __future__ import annotations

from typing import Any

import httpx

from numdiff.client import Client
from numdiff.service.api.headers import PAGE_CSP, REPORT_CSP
from tests.report._browser import browser, need_browser, screenshots
from tests.service._server import Server, sign_in, submit_files

OUTPUT = screenshots("pages")


def _violations(driver: Any) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if "Content Security Policy" in e["message"]]


def test_every_answer_has_a_csp_without_unsafe_inline_and_pages_hold_nothing_inline(sqlite_server: Server) -> None:
    token = sqlite_server.token("csp-headers")
    with Client(sqlite_server.url, token) as client:
        run_id = submit_files(client, model="csp", device="pixel8")["id"]
        assert client.wait(run_id)["status"] == "done"
    cookies = sign_in(sqlite_server.url, token)
    directives = {d.split()[0]: d.split()[1:] for d in PAGE_CSP.split("; ")}
    assert directives["default-src"] == ["'none'"] and directives["style-src"] == ["'self'"]
    assert "script-src" not in directives  # the pages run no script at all (default-src 'none')
    for path in ("/ui/login", "/ui", "/ui/models/csp", "/ui/models/csp/compare?by=device", f"/ui/runs/{run_id}",
                 "/ui/runs/abc", "/docs", "/static/pages.css", "/api/v1/runs", "/healthz"):
        r = httpx.get(sqlite_server.url + path, cookies=cookies, headers={"Authorization": f"Bearer {token}"},
                      timeout=30)
        assert r.status_code in (200, 404), (path, r.status_code)
        assert r.headers["content-security-policy"] == PAGE_CSP, path
        if r.headers["content-type"].startswith("text/html"):
            assert "<style" not in r.text and "<script" not in r.text and " style=" not in r.text, path
            assert '<link rel="stylesheet" href="/static/pages.css">' in r.text, path
    css = httpx.get(sqlite_server.url + "/static/pages.css", timeout=30)
    assert css.headers["content-type"].startswith("text/css") and "header{background:#1d2b3a" in css.text
    for path in (f"/ui/runs/{run_id}/report", f"/api/v1/runs/{run_id}/report.html"):
        r = httpx.get(sqlite_server.url + path, cookies=cookies, headers={"Authorization": f"Bearer {token}"},
                      timeout=30)
        assert r.headers["content-security-policy"] == REPORT_CSP, path
        assert "unsafe-inline" not in r.headers["content-security-policy"] and "unsafe-inline" not in r.text


def test_pages_and_the_framed_report_work_under_the_policy_in_chromium(sqlite_server: Server) -> None:
    need_browser()
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    token = sqlite_server.token("csp-browser")
    with Client(sqlite_server.url, token) as client:
        run_id = submit_files(client, model="csp-b", device="pixel8")["id"]
        assert client.wait(run_id)["status"] == "done"
    OUTPUT.mkdir(parents=True, exist_ok=True)
    with browser() as driver:
        driver.get(sqlite_server.url + "/ui/login")
        driver.get_log("browser")
        # the style sheet applies (header #1d2b3a); the sign-in form still posts (form-action 'self')
        assert driver.execute_script(
            "return getComputedStyle(document.querySelector('header')).backgroundColor") == "rgb(29, 43, 58)"
        driver.find_element(By.NAME, "token").send_keys(token)
        driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        WebDriverWait(driver, 30).until(lambda d: d.current_url.rstrip("/").endswith("/ui"))

        for path in ("/ui", "/ui/models/csp-b", "/docs", "/ui/runs/abc"):
            driver.get(sqlite_server.url + path)
            header = driver.execute_script("return getComputedStyle(document.querySelector('header')).backgroundColor")
            assert header == "rgb(29, 43, 58)", path
            if path != "/docs":  # signed in: the sign-out form floats right (a class now, was an inline style)
                assert driver.execute_script(
                    "return getComputedStyle(document.querySelector('form.signout')).cssFloat") == "right", path
        driver.get(sqlite_server.url + "/docs")
        assert driver.execute_script(
            "return getComputedStyle(document.querySelector('section.op')).backgroundColor") == "rgb(255, 255, 255)"

        driver.get(f"{sqlite_server.url}/ui/runs/{run_id}")
        frame = driver.find_element(By.CSS_SELECTOR, "iframe.report")
        assert frame.size["height"] == 902  # iframe.report: 900 px and a 1 px border, from the style sheet
        driver.switch_to.frame(frame)
        WebDriverWait(driver, 30).until(lambda d: d.execute_script("return document.body.getAttribute('data-ready')"))
        assert driver.execute_script("return document.querySelectorAll('#rows-table tbody tr').length") > 0
        assert driver.execute_script(
            "return getComputedStyle(document.querySelector('header')).backgroundColor") == "rgb(38, 50, 56)"
        driver.switch_to.default_content()
        driver.save_screenshot(str(OUTPUT / "run-page-strict-csp.png"))
        assert _violations(driver) == []
