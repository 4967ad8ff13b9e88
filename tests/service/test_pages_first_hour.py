"""Issue 23 item 6, the web pages as a person sees them (headless Chromium, screenshots under test-output/):
each run's verdict at a glance in the run list, breadcrumbs, an HTML page with a way back for a missing
model or run, the compare page's wording and its culprit / inherited marks."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import httpx

from numdiff.client import Client
from numdiff.report.verdicts import CULPRIT, INHERITED
from numdiff.service.web.render import page
from tests.report._browser import browser, need_browser, screenshots
from tests.service._server import Server, sign_in, submit_files

OUTPUT = screenshots("pages")
DEVICES = ("pixel8", "pixel9")


def _sign_in(driver: Any, server: Server, token: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(server.url + "/ui/login")
    driver.find_element(By.NAME, "token").send_keys(token)
    driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    WebDriverWait(driver, 30).until(lambda d: d.current_url.rstrip("/").endswith("/ui"))


def _texts(driver: Any, css: str) -> list[str]:
    return [str(t) for t in driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map(e => e.textContent.trim())", css)]


def test_run_list_verdicts_breadcrumbs_and_error_pages(sqlite_server: Server) -> None:
    need_browser()
    from selenium.webdriver.common.by import By

    token = sqlite_server.token("pages")
    with Client(sqlite_server.url, token) as client:
        ids = [submit_files(client, model="mlp-pages", device=d, build=str(200 + i))["id"]
               for i, d in enumerate(DEVICES)]
        assert all(client.wait(i)["status"] == "done" for i in ids)
        client.set_baseline("mlp-pages", ids[0])
    OUTPUT.mkdir(parents=True, exist_ok=True)
    with browser() as driver:
        _sign_in(driver, sqlite_server, token)
        driver.get(sqlite_server.url + "/ui/models/mlp-pages")
        headers = _texts(driver, "#runs tr:first-child th")
        assert headers[4:8] == ["culprit", "lowest SNR (dB)", "latency", "vs baseline"], headers
        for run_id in ids:
            culprit = _texts(driver, f'#runs tr[data-run="{run_id}"] td.culprit')[0]
            assert culprit == "none" or culprit.startswith("culprit "), culprit
            snr = _texts(driver, f'#runs tr[data-run="{run_id}"] td.snr')[0]
            assert re.fullmatch(r"-?[0-9]+\.[0-9]|∞", snr), snr
            latency = _texts(driver, f'#runs tr[data-run="{run_id}"] td.latency')[0]
            assert re.fullmatch(r"[0-9.e+-]+ (ms|us|ns|s|cycles|ticks)", latency), latency
        assert _texts(driver, f'#runs tr[data-run="{ids[0]}"] td.change') == ["baseline"]
        change = _texts(driver, f'#runs tr[data-run="{ids[1]}"] td.change')[0]
        assert re.fullmatch(r"SNR [+-][0-9.]+ dB · latency [+-][0-9.]+ %", change), change
        assert _texts(driver, "#crumbs > *") == ["project pages", "model mlp-pages"]
        driver.save_screenshot(str(OUTPUT / "model-runs.png"))

        driver.get(f"{sqlite_server.url}/ui/runs/{ids[1]}")
        assert _texts(driver, "#crumbs > *") == ["project pages", "model mlp-pages", f"run {ids[1]}"]
        driver.find_element(By.LINK_TEXT, "model mlp-pages").click()
        assert driver.current_url.endswith("/ui/models/mlp-pages")

        for path, says in ((f"/ui/runs/{10**9}", f"no run {10**9} in this project"),
                           ("/ui/models/no-such-model", "no model 'no-such-model' in this project"),
                           ("/ui/models/no-such-model/compare?by=device", "no model 'no-such-model'")):
            driver.get(sqlite_server.url + path)
            assert says in driver.find_element(By.ID, "error").text, path
            assert driver.find_element(By.TAG_NAME, "h1").text == "Not found"
            assert "Sign out" in driver.find_element(By.TAG_NAME, "header").text
            if path.startswith("/ui/runs"):
                driver.save_screenshot(str(OUTPUT / "missing-run.png"))
            driver.find_element(By.ID, "back").click()
            assert driver.current_url.rstrip("/").endswith("/ui")

        driver.get(sqlite_server.url + "/ui/models/mlp-pages/compare?by=build")
        text = driver.find_element(By.TAG_NAME, "main").text
        assert "best minus worst device" not in text
        assert "the highest minus the lowest finite SNR of that op over the columns" in text
        assert _texts(driver, "#crumbs > *") == ["project pages", "model mlp-pages", "compare by build"]
        driver.save_screenshot(str(OUTPUT / "compare-by-build.png"))
    # the status code a program sees is still 404, and the body is a page, not JSON
    cookies = sign_in(sqlite_server.url, token)
    r = httpx.get(f"{sqlite_server.url}/ui/runs/{10**9}", cookies=cookies)
    assert r.status_code == 404 and r.headers["content-type"].startswith("text/html") and "<h1>Not found</h1>" in r.text


def test_compare_marks_culprit_and_inherited(tmp_path: Path) -> None:
    """The compare page's marks, as the page a browser gets (rendered from a made-up table)."""
    need_browser()
    from selenium.webdriver.common.by import By

    class Run:
        def __init__(self, id: int) -> None:
            self.id = id

    class Model:
        name = "m"

    columns = [("pixel8", Run(1)), ("pixel9", Run(2))]
    table = {"aten.linear": {"pixel8": 12.0, "pixel9": 55.0}, "aten.relu": {"pixel8": 11.0, "pixel9": math.inf}}
    causes = {"aten.linear": {"pixel8": CULPRIT}, "aten.relu": {"pixel8": INHERITED}}
    html = page("compare.html", title="m: compare by device", model=Model(), by="device", columns=columns,
                order=list(table), table=table, worst={"aten.linear": 12.0, "aten.relu": 11.0},
                spread={"aten.linear": 43.0, "aten.relu": None}, totals={"pixel8": 1.0, "pixel9": 2.0}, unit="ms",
                fmt=lambda v: "—" if v is None else ("∞" if v == math.inf else f"{v:.1f}"), causes=causes,
                CULPRIT=CULPRIT, INHERITED=INHERITED, crumbs=[("project p", "/ui"), ("model m", "/ui/models/m")],
                signed_in=True).body.decode()
    (tmp_path / "compare.html").write_text(html, encoding="utf-8")
    with browser() as driver:
        driver.get((tmp_path / "compare.html").as_uri())
        rows = driver.find_elements(By.CSS_SELECTOR, "#compare tr")[2:]
        cells = [[td.get_attribute("class").split()[-1] for td in tr.find_elements(By.CSS_SELECTOR, "td.num")[:2]]
                 for tr in rows]
        assert cells == [["mark-culprit", "good"], ["mark-inherited", "good"]], cells
        said = [tr.find_element(By.CSS_SELECTOR, "td.cause").text for tr in rows]
        assert said == ["culprit on pixel8", "inherited on pixel8"], said
        assert rows[0].find_elements(By.CSS_SELECTOR, "td.num")[0].get_attribute("title") == "culprit on pixel8"
        OUTPUT.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(OUTPUT / "compare-marks.png"))


def test_a_run_id_that_is_not_a_number_is_the_missing_run_page_not_json(sqlite_server: Server) -> None:
    """``/ui/runs/abc`` (and 0, a 20-digit id, or the report of one) answers the HTML error page with a way
    back, as a missing run does; FastAPI's JSON 422 was shown before. The id never reaches the database."""
    cookies = sign_in(sqlite_server.url, sqlite_server.token("pages-ids"))
    for path in ("/ui/runs/abc", "/ui/runs/0", "/ui/runs/-3", "/ui/runs/99999999999999999999",
                 "/ui/runs/1e3", "/ui/runs/abc/report", "/ui/runs/%EF%BC%91"):
        r = httpx.get(sqlite_server.url + path, cookies=cookies, timeout=30)
        assert r.status_code == 404, (path, r.status_code, r.text[:200])
        assert r.headers["content-type"].startswith("text/html"), path
        assert "<h1>Not found</h1>" in r.text and 'id="back" href="/ui"' in r.text, path
        assert "a run&#39;s id is a whole number from 1 to 2147483647" in r.text, path
    # not signed in: the sign-in form, as for any page
    r = httpx.get(sqlite_server.url + "/ui/runs/abc", timeout=30)
    assert r.status_code == 303 and r.headers["location"] == "/ui/login"


def test_a_nul_or_an_unreadable_form_on_a_page_is_an_html_page_with_a_way_back(sqlite_server: Server) -> None:
    """A NUL character in a page's path or query, a form without its field, an unknown page: an HTML error page
    saying what is wrong with a link back (FastAPI's JSON 422/404 was shown before); the API keeps its JSON."""
    token = sqlite_server.token("pages-nul")
    cookies = sign_in(sqlite_server.url, token)
    for path in ("/ui/models/a%00b", "/ui/runs/1%00", "/ui?x=%00", "/ui/models/m/compare?by=a%00b",
                 "/ui/runs/1/report?x=%00"):
        r = httpx.get(sqlite_server.url + path, cookies=cookies, timeout=30)
        assert r.status_code == 422, (path, r.status_code)
        assert r.headers["content-type"].startswith("text/html"), (path, r.text[:200])
        assert "<h1>Bad request</h1>" in r.text and "the URL holds a NUL character" in r.text, path
        assert '<a id="back" href="/ui">Back to your project&#39;s models</a>' in r.text and "Sign out" in r.text
    r = httpx.post(sqlite_server.url + "/ui/login", data={}, timeout=30)  # the sign-in form without its token
    assert r.status_code == 422 and r.headers["content-type"].startswith("text/html")
    assert "this request could not be read (token: field required)" in r.text and 'id="back"' in r.text
    assert "Sign out" not in r.text  # not signed in
    r = httpx.get(sqlite_server.url + "/ui/no-such-page", cookies=cookies, timeout=30)
    assert r.status_code == 404 and "<h1>Not found</h1>" in r.text and 'id="back"' in r.text
    # the API answers JSON, as before
    r = httpx.get(sqlite_server.url + "/api/v1/runs?model=a%00b", headers={"Authorization": f"Bearer {token}"},
                  timeout=30)
    assert r.status_code == 422 and r.json() == {"detail": "the URL holds a NUL character"}
    r = httpx.get(sqlite_server.url + "/api/v1/no-such-route", timeout=30)
    assert r.status_code == 404 and r.headers["content-type"].startswith("application/json")
