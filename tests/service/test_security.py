"""Security of the service: tokens, project isolation, file names, size limits, hostile uploads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from numdiff.cli import main
from numdiff.client import AuthError, Client, ServiceInputError, UnreachableError
from tests.security.hostile import ATEN, Program, canary_payload, craft, user_input_name
from tests.service._server import EXAMPLE, Server, free_port, sign_in, submit_files
from tests.service.conftest import data_files

FIXTURES = Path(__file__).parents[1] / "fixtures"


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def two_projects(sqlite_server: Server) -> tuple[str, str, dict[str, Any]]:
    """Tokens of projects A and B, and a finished run of A."""
    a, b = sqlite_server.token("proj-a"), sqlite_server.token("proj-b")
    with Client(sqlite_server.url, a) as client:
        run = client.wait(submit_files(client, model="secret-model", device="a1")["id"])
    assert run["status"] == "done"
    return a, b, run


ROUTES = ["/api/v1/runs/{id}", "/api/v1/runs/{id}/result", "/api/v1/runs/{id}/analysis.json",
          "/api/v1/runs/{id}/report.html", "/api/v1/runs/{id}/gap.csv"]


def test_no_token_or_a_bad_one_is_401(sqlite_server: Server, two_projects: tuple[str, str, dict[str, Any]]) -> None:
    run = two_projects[2]
    for route in ROUTES + ["/api/v1/runs", "/api/v1/models", "/api/v1/project"]:
        url = sqlite_server.url + route.format(id=run["id"])
        assert httpx.get(url).status_code == 401, route
        assert httpx.get(url, headers=_auth("ndt_not-a-token")).status_code == 401, route
    r = httpx.post(sqlite_server.url + "/api/v1/runs", files={"etdump": ("x", b"123")}, data={"model": "m"})
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    with Client(sqlite_server.url, "ndt_not-a-token") as client, pytest.raises(AuthError, match="refused the token"):
        client.run(run["id"])


def test_another_projects_run_is_404_like_a_missing_one(sqlite_server: Server,
                                                        two_projects: tuple[str, str, dict[str, Any]],
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    _, b, run = two_projects
    missing = 10_000_000
    for route in ROUTES:
        foreign = httpx.get(sqlite_server.url + route.format(id=run["id"]), headers=_auth(b))
        absent = httpx.get(sqlite_server.url + route.format(id=missing), headers=_auth(b))
        assert foreign.status_code == absent.status_code == 404, route
        assert foreign.json()["detail"].replace(str(run["id"]), "N") == absent.json()["detail"].replace(str(missing), "N")
    r = httpx.post(sqlite_server.url + "/api/v1/compare", json={"new_run": run["id"], "base_run": run["id"]},
                   headers=_auth(b))
    assert r.status_code == 404
    assert httpx.get(sqlite_server.url + "/api/v1/runs", headers=_auth(b)).json() == {"runs": []}
    assert "secret-model" not in httpx.get(sqlite_server.url + "/api/v1/models", headers=_auth(b)).text
    ui = httpx.get(f"{sqlite_server.url}/ui/runs/{run['id']}", cookies=sign_in(sqlite_server.url, b))
    assert ui.status_code == 404
    codes = []
    for rid in (run["id"], missing):
        codes.append(main(["runs", "show", "--server", sqlite_server.url, "--token", b, str(rid)]))
        assert "not found in this token's project" in capsys.readouterr().err
    assert codes == [5, 5]


def test_unreachable_server_is_exit_6(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["runs", "show", "--server", f"http://127.0.0.1:{free_port()}", "--token", "t", "1"])
    assert code == 6
    assert "did not answer" in capsys.readouterr().err
    with Client(f"http://127.0.0.1:{free_port()}", "t") as client, pytest.raises(UnreachableError, match="did not answer"):
        client.health()


def test_file_names_are_never_paths(sqlite_server: Server, tmp_path: Path) -> None:
    token = sqlite_server.token("names")
    outside = sqlite_server.data.parent
    before = set(outside.rglob("*"))
    files = {"etrecord": ("../../../../escape_etrecord", EXAMPLE.etrecord.read_bytes()),
             "etdump": ("/tmp/../../escape_etdump\x00.txt", EXAMPLE.etdump.read_bytes()),
             "debug_buffer": ("..\\..\\escape_debug", EXAMPLE.debug_buffer.read_bytes())}
    r = httpx.post(sqlite_server.url + "/api/v1/runs", files=files, data={"model": "names"}, headers=_auth(token))
    assert r.status_code == 201, r.text
    with Client(sqlite_server.url, token) as client:
        assert client.wait(r.json()["id"])["status"] == "done"
    new = {p for p in set(outside.rglob("*")) - before}
    assert not [p for p in new if "escape" in p.name]
    assert not list(Path("/tmp").glob("escape_*"))
    assert all(p.is_relative_to(sqlite_server.data) or p.suffix == ".log" for p in new)


def test_oversized_upload_is_413_and_leaves_nothing(sqlite_server: Server) -> None:
    token = sqlite_server.token("big")
    big = b"\0" * (1024 * 1024 + 1)  # the test server allows 1 MiB per file
    r = httpx.post(sqlite_server.url + "/api/v1/runs", headers=_auth(token), data={"model": "big"},
                   files={"etrecord": ("e", EXAMPLE.etrecord.read_bytes()), "etdump": ("d", big)})
    assert r.status_code == 413
    assert "limit of 1048576 bytes" in r.json()["detail"]
    assert httpx.get(sqlite_server.url + "/api/v1/runs", headers=_auth(token)).json() == {"runs": []}
    assert not [p for p in (sqlite_server.data / "tmp").iterdir() if p.name.startswith("upload-")]
    assert not list((sqlite_server.data / "tmp").rglob("upload-*"))  # temporaries live in per-process folders
    with Client(sqlite_server.url, token) as client:
        huge = Path(sqlite_server.data.parent / "huge.etdp")
        huge.write_bytes(big)
        with pytest.raises(ServiceInputError, match="HTTP 413"):
            client.submit("big", EXAMPLE.etrecord, huge)


def _symbolic_first_dim(expr: str) -> Any:
    def mutate(program: Program) -> None:
        meta = program["graph_module"]["graph"]["tensor_values"][user_input_name(program)]
        meta["sizes"][0] = {"as_expr": {"expr_str": expr, "hint": {"as_int": 1}}}

    return mutate


def test_code_running_etrecord_fails_its_job_cleanly_and_the_server_stays_up(
        sqlite_server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    canary = tmp_path / "CANARY"
    hostile = craft(tmp_path, ATEN, _symbolic_first_dim(canary_payload(canary)))
    token = sqlite_server.token("hostile")
    code = main(["submit", "--server", sqlite_server.url, "--token", token, "--model", "hostile",
                 "--etrecord", str(hostile), "--etdump", str(FIXTURES / "mlp_fp32" / "etdump.etdp"),
                 "--debug-buffer", str(FIXTURES / "mlp_fp32" / "debug_buffer.bin"), "--wait"])
    out, err = capsys.readouterr()
    assert code == 3, err
    run = json.loads(out)
    assert run["status"] == "failed"
    assert run["reason"].startswith("bad input:") and "symbolic expression" in run["reason"]
    assert not canary.exists()
    assert httpx.get(sqlite_server.url + "/healthz").json() == {"status": "ok"}
    with Client(sqlite_server.url, token) as client:
        assert client.wait(submit_files(client, model="after-hostile")["id"])["status"] == "done"
        with pytest.raises(ServiceInputError, match="failed"):
            client.fetch_report(run["id"], tmp_path / "r.html")


def test_corrupt_etdump_fails_with_a_reason(sqlite_server: Server, tmp_path: Path) -> None:
    junk = tmp_path / "junk.etdp"
    junk.write_bytes(b"not an etdump" * 50)
    with Client(sqlite_server.url, sqlite_server.token("junk")) as client:
        run = client.wait(client.submit("junk", EXAMPLE.etrecord, junk)["id"])
    assert run["status"] == "failed"
    assert run["reason"].startswith("bad input:") and "ETDump" in run["reason"]


def test_uploads_never_land_outside_the_store(sqlite_server: Server) -> None:
    objects = [p for p in data_files(sqlite_server.data) if p.is_relative_to(sqlite_server.data / "objects")]
    assert objects and all(len(p.parent.name) == 2 and len(p.name) == 62 for p in objects)
