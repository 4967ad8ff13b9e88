"""The core flow against a real server, on SQLite and on PostgreSQL 15: submit, wait, show, report, compare."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from numdiff.cli import main
from numdiff.client import Client, ServiceInputError
from numdiff.report import Analysis
from tests.service._server import EXAMPLE, Server, submit_files
from tests.service.conftest import floats, snr_rows

GAP_COLUMNS = {"aot_ops", "aot_intermediate_output", "runtime_ops", "runtime_intermediate_output", "gap"}


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_submit_wait_prints_gap_and_culprits_as_the_library_computes_them(
        server: Server, reference: Analysis, capsys: pytest.CaptureFixture[str]) -> None:
    token = server.token("flow")
    code, out, err = _cli(capsys, "submit", "--server", server.url, "--token", token, "--model", "mlp",
                          "--etrecord", str(EXAMPLE.etrecord), "--etdump", str(EXAMPLE.etdump),
                          "--debug-buffer", str(EXAMPLE.debug_buffer), "--label", "device=pixel8",
                          "--label", "build=100", "--wait")
    assert code == 0, err
    run = json.loads(out)
    assert run["status"] == "done" and run["reason"] is None
    assert run["labels"] == {"device": "pixel8", "build": "100"}
    assert all(GAP_COLUMNS <= set(row) for row in run["gap"])
    assert [(r["aot_ops"], r["runtime_ops"], floats(r["gap"])) for r in run["gap"]] == snr_rows(reference)
    assert run["gap"][0]["aot_intermediate_output"]["shape"] == [[2, 16]]
    assert reference.culprits.available
    assert [c["aot_ops"] for c in run["culprits"]] == [c.aot_ops for c in reference.culprits.rows]

    # the same JSON for an existing run; the saved analysis round-trips through Analysis
    code, out2, _ = _cli(capsys, "runs", "show", "--server", server.url, "--token", token, str(run["id"]))
    assert code == 0 and json.loads(out2) == run
    with Client(server.url, token) as client:
        saved = Analysis.model_validate(client.analysis(run["id"]))
    assert saved.labels["device"] == "pixel8" and saved.labels["model"] == "mlp"
    assert snr_rows(saved) == snr_rows(reference)


def test_env_fallbacks_fetch_report_list_and_compare(server: Server, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    token = server.token("flow-env")
    monkeypatch.setenv("NUMDIFF_SERVER", server.url)
    monkeypatch.setenv("NUMDIFF_TOKEN", token)
    with Client() as client:
        base = client.wait(submit_files(client, device="pixel8", build="1")["id"])
        new = client.wait(submit_files(client, device="pixel9", build="2")["id"])
        assert base["status"] == new["status"] == "done"
        assert [r["id"] for r in client.runs(model="mlp", labels={"device": "pixel9"})] == [new["id"]]
        assert {r["id"] for r in client.runs(status="done")} == {base["id"], new["id"]}
        gate = client.compare(new["id"], base["id"])
        assert gate["passed"] is True and gate["regressions"] == 0 and gate["diff"]["ops"]
        client.set_baseline("mlp", base["id"])
        assert client.compare(new["id"])["base_run"] == base["id"]
    code, _, err = _cli(capsys, "fetch-report", str(new["id"]), "-o", str(tmp_path / "r.html"))
    assert code == 0, err
    html = (tmp_path / "r.html").read_text()
    assert html.startswith("<!doctype html") or "<html" in html[:500]
    assert "pixel9" in html
    code, out, _ = _cli(capsys, "runs", "compare", str(new["id"]), "--format", "json")
    assert code == 0 and json.loads(out)["passed"] is True
    code, out, _ = _cli(capsys, "runs", "compare", str(new["id"]))  # a table for a person by default
    assert code == 0 and out.startswith(f"numdiff runs compare: run {new['id']} against run {base['id']} "
                                        "(the model's baseline): no regression (")
    assert "\nTotal time in top-level events\nbase " in out and "\nBy op category\n" in out
    csv = httpx.get(f"{server.url}/api/v1/runs/{new['id']}/gap.csv", headers={"Authorization": f"Bearer {token}"})
    assert csv.status_code == 200 and csv.text.splitlines()[0].startswith("index,aot_ops")
    assert len(csv.text.splitlines()) == 1 + len(new["gap"])


def test_admin_create_token_prints_it_last_and_revoke_ends_it(server: Server,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--data", str(server.data)] + (["--db", server.db_url] if server.db_url else [])
    code, out, _ = _cli(capsys, "admin", "create-token", *argv, "--project", "admin-test")
    assert code == 0
    token = out.strip().splitlines()[-1]
    assert httpx.get(f"{server.url}/api/v1/project", headers={"Authorization": f"Bearer {token}"}).json()["name"] \
        == "admin-test"
    code, _, _ = _cli(capsys, "admin", "revoke-token", *argv, token[:12])
    assert code == 0
    assert httpx.get(f"{server.url}/api/v1/project", headers={"Authorization": f"Bearer {token}"}).status_code == 401


def test_openapi_docs_are_served(sqlite_server: Server) -> None:
    spec = httpx.get(sqlite_server.url + "/openapi.json").json()
    assert "/api/v1/runs" in spec["paths"] and "/api/v1/compare" in spec["paths"]
    assert httpx.get(sqlite_server.url + "/docs").status_code == 200


def test_an_etrecord_uploaded_for_many_runs_is_stored_once(sqlite_server: Server) -> None:
    token = sqlite_server.token("dedupe")
    with Client(sqlite_server.url, token) as client:
        runs = [submit_files(client, model="dedupe", device=d) for d in ("a", "b", "c")]
    assert len({r["artifacts"]["etrecord"] for r in runs}) == 1
    digest = runs[0]["artifacts"]["etrecord"]
    blob = sqlite_server.data / "objects" / digest[:2] / digest[2:]
    assert blob.read_bytes() == EXAMPLE.etrecord.read_bytes()
    assert len(list((sqlite_server.data / "objects" / digest[:2]).iterdir())) >= 1


def test_each_stage_is_its_own_job_with_its_result(sqlite_server: Server, reference: Analysis) -> None:
    from numdiff.analysis.records import CulpritSection
    from numdiff.analysis.stages import STAGES, GapPart, ProfilePart

    with Client(sqlite_server.url, sqlite_server.token("stages")) as client:
        run = client.wait(submit_files(client)["id"])
        assert run["status"] == "done"
        assert [(j["kind"], j["status"], j["attempts"]) for j in run["jobs"]] == [(k, "done", 1) for k in STAGES]
        assert all(isinstance(j["elapsed_ms"], int) and j["elapsed_ms"] >= 0 for j in run["jobs"])
        profile = ProfilePart.model_validate(client.stage(run["id"], "profile"))
        gap = GapPart.model_validate(client.stage(run["id"], "gap"))
        culprits = CulpritSection.model_validate(client.stage(run["id"], "culprits"))
        whole = Analysis.model_validate(client.stage(run["id"], "report"))
        assert whole.model_dump_json() == Analysis.model_validate(client.analysis(run["id"])).model_dump_json()
        # the parts are what the one-call library path computes (as JSON: NaN never equals itself)
        assert profile.profile.model_dump_json() == reference.profile.model_dump_json()
        assert [(a.role, a.sha256, a.size) for a in profile.artifacts] == \
            [(a.role, a.sha256, a.size) for a in reference.artifacts]
        assert gap.gap is not None and snr_rows(whole) == snr_rows(reference)
        assert culprits.model_dump_json() == reference.culprits.model_dump_json() == whole.culprits.model_dump_json()
        with pytest.raises(ServiceInputError, match="no stage 'trace'"):
            client.stage(run["id"], "trace")


def test_stages_wait_their_turn_and_a_failed_stage_stops_the_rest(tmp_path: Path) -> None:
    from tests.service._server import running

    junk = tmp_path / "junk.etdp"
    junk.write_bytes(b"not an etdump" * 50)
    with running(tmp_path / "idle", None, workers=0) as idle, Client(idle.url, idle.token("idle")) as client:
        run_id = submit_files(client)["id"]  # no worker: every stage stays queued
        assert [(j["kind"], j["status"]) for j in client.run(run_id)["jobs"]] == \
            [("profile", "queued"), ("gap", "queued"), ("culprits", "queued"), ("report", "queued")]
        with pytest.raises(ServiceInputError, match="the profile stage of run .* is queued"):
            client.stage(run_id, "profile")
    with running(tmp_path / "busy", None, workers=1) as busy, Client(busy.url, busy.token("fail")) as client:
        run = client.wait(client.submit("junk", EXAMPLE.etrecord, junk)["id"], timeout=120)
    assert run["status"] == "failed" and run["reason"].startswith("bad input:")
    jobs = {j["kind"]: j for j in run["jobs"]}
    assert jobs["profile"]["status"] == "failed" and jobs["profile"]["reason"] == run["reason"]
    assert all(jobs[k]["status"] == "failed" and jobs[k]["reason"] == "not run: the profile stage failed"
               for k in ("gap", "culprits", "report"))


def test_api_json_writes_null_where_the_cli_json_does(sqlite_server: Server, reference: Analysis,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """No "Infinity"/"NaN" strings in the API's answers: numbers as numbers and null where there is none, as
    ``numdiff gap --format json`` writes them (the bundled example has layers at an infinite SNR)."""
    import math

    assert reference.gap is not None and any(math.isinf(v) for r in reference.gap.rows for v in r.snr)
    token = sqlite_server.token("nulls")
    with Client(sqlite_server.url, token) as client:
        run_id = submit_files(client, model="nulls", device="pixel8")["id"]
        assert client.wait(run_id)["status"] == "done"
    body = httpx.get(f"{sqlite_server.url}/api/v1/runs/{run_id}/result",
                     headers={"Authorization": f"Bearer {token}"}, timeout=30).text

    def refuse(constant: str) -> None:
        raise AssertionError(f"the API wrote the non-JSON constant {constant}")

    result = json.loads(body, parse_constant=refuse)
    assert "Infinity" not in body and "NaN" not in body
    api_gaps = [r["gap"] for r in result["gap"]]
    assert [[None if not math.isfinite(v) else v for v in r.snr] for r in reference.gap.rows] == api_gaps
    assert None in [v for gap in api_gaps for v in gap]
    assert all(isinstance(v, float) or v is None for c in result["culprits"] for v in c.values()
               if isinstance(v, float) or v is None)

    code, out, _ = _cli(capsys, "gap", "--etdump", str(EXAMPLE.etdump), "--etrecord", str(EXAMPLE.etrecord),
                        "--debug-buffer", str(EXAMPLE.debug_buffer), "--format", "json")
    assert code == 0
    cli_gaps = [r["gap"] for r in json.loads(out, parse_constant=refuse)["rows"]]
    assert cli_gaps == api_gaps  # the same rows, and null in the same places
