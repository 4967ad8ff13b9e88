"""Issue 20 item 4 over HTTP: the service's compare refuses runs of different programs (409, and
``numdiff runs compare`` exits 3), and a run whose program is not its model's baseline's is flagged."""

from __future__ import annotations

import json

import httpx
import pytest

from numdiff.cli import main
from numdiff.client import Client, ServiceInputError
from tests.conftest import FIXTURES
from tests.service._server import Server, sign_in, submit_files


def test_compare_refuses_runs_of_different_programs(sqlite_server: Server,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    server = sqlite_server
    token = server.token("gate-programs")
    cnn = FIXTURES / "cnn_nested"
    with Client(server.url, token) as client:
        base = client.wait(submit_files(client, model="gate", device="pixel8")["id"])
        same = client.wait(submit_files(client, model="gate", device="pixel9")["id"])
        other = client.wait(client.submit("gate", cnn / "etrecord.bin", cnn / "etdump.etdp", cnn / "debug_buffer.bin",
                                          {"device": "pixel9"})["id"])
        assert base["status"] == same["status"] == other["status"] == "done", other.get("reason")
        assert client.compare(same["id"], base["id"])["passed"] is True
        with pytest.raises(ServiceInputError, match="different programs"):
            client.compare(other["id"], base["id"])
        r = httpx.post(f"{server.url}/api/v1/compare", json={"new_run": other["id"], "base_run": base["id"]},
                       headers={"Authorization": f"Bearer {token}"}, timeout=60)
        assert r.status_code == 409 and f"runs {base['id']} (base) and {other['id']} (new)" in r.json()["detail"]

        # flagged against the model's baseline in the run's JSON
        assert client.result(other["id"])["program_differs_from_baseline"] is None  # no baseline yet
        client.set_baseline("gate", base["id"])
        flagged, fine = client.result(other["id"]), client.result(same["id"])
        assert flagged["program_differs_from_baseline"] is True
        assert flagged["program"] != flagged["baseline_program"] == fine["program"]
        assert fine["program_differs_from_baseline"] is False

    # and on the run page
    cookies = sign_in(server.url, token)
    flagged_page = httpx.get(f"{server.url}/ui/runs/{other['id']}", cookies=cookies, timeout=30)
    fine_page = httpx.get(f"{server.url}/ui/runs/{same['id']}", cookies=cookies, timeout=30)
    assert flagged_page.status_code == fine_page.status_code == 200
    assert 'id="program-differs"' in flagged_page.text and "differs from the model's baseline" in flagged_page.text
    assert 'id="program-differs"' not in fine_page.text

    code = main(["runs", "compare", "--server", server.url, "--token", token, str(other["id"])])
    out, err = capsys.readouterr()
    assert code == 3 and out == "" and "different programs" in err
    assert "\\n" not in err and err.count("\n") == 1 and " | " in err  # one line: what | what to do
    code = main(["runs", "compare", "--server", server.url, "--token", token, str(same["id"]), "--format", "json"])
    assert code == 0 and json.loads(capsys.readouterr().out)["passed"] is True
