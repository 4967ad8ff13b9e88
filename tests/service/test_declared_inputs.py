"""A device lab can say over the service which graph inputs a run used, as ``numdiff analyze
--inputs-are-representative`` and ``--step-inputs`` do.

A run whose ops reading the graph input ``x`` are all unrelated to their replays may have used
other inputs than the ETRecord's representative ones (``culprit_near_inputs``): its culprit stage
leaves those ops unjudged and the service's compare does not gate its layers. Uploaded with
``inputs_are_representative``, the same files are judged on the representative inputs, and the
compare gates their layers.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from numdiff._core.advice import INPUTS_HINT
from numdiff.cli import main
from numdiff.client import Client, ServiceInputError
from tests.culprits.helpers import folder
from tests.service._server import Server, sign_in


def _files() -> tuple[Any, Any, Any]:
    d = folder("culprit_near_inputs")
    return d / "etrecord.bin", d / "etdump.etdp", d / "debug_buffer.bin"


def test_a_declared_run_is_judged_on_the_representative_inputs(sqlite_server: Server,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    server = sqlite_server
    token = server.token("declared-inputs")
    with Client(server.url, token) as client:
        doubt = [client.wait(client.submit("near", *_files(), {"n": str(i)})["id"]) for i in range(2)]
        declared = [client.wait(client.submit("near", *_files(), {"n": str(i)}, inputs_are_representative=True)["id"])
                    for i in range(2)]
        assert all(r["status"] == "done" for r in doubt + declared), [r.get("reason") for r in doubt + declared]
        assert [r["inputs_are_representative"] for r in doubt + declared] == [False, False, True, True]

        in_doubt = client.analysis(doubt[0]["id"])["culprits"]
        vouched = client.analysis(declared[0]["id"])["culprits"]
        assert in_doubt["inputs_in_doubt"] == ["x"] and "representative" in in_doubt["inputs_note"]
        assert vouched["inputs_in_doubt"] == [] and vouched["inputs_note"] is None

        not_gated = client.compare(doubt[1]["id"], doubt[0]["id"])
        gated = client.compare(declared[1]["id"], declared[0]["id"])
        why = not_gated["diff"]["error_not_compared"]
        assert not_gated["passed"] is False and not_gated["regressions"] == 0
        assert why.startswith("error not compared: the base run's graph input(s) x and the new run's graph input(s) x")
        assert why.endswith(INPUTS_HINT) and "submit" in INPUTS_HINT  # the hint names the way to say it here too
        assert gated["passed"] is True and gated["diff"]["error_not_compared"] is None, gated
        def compared(report: dict[str, Any]) -> list[str]:
            return [op["key"] for op in report["diff"]["ops"] if op["kind"] == "error"]

        assert compared(not_gated) == [] and {"add", "layer_norm", "linear"} <= set(compared(gated))

        mixed = [client.wait(client.submit("mixed", *_files(), {"dev": dev}, inputs_are_representative=declare)["id"])
                 for dev, declare in (("a", False), ("b", True))]
        assert [r["status"] for r in mixed] == ["done", "done"]

    cookies = sign_in(server.url, token)
    pages = [httpx.get(f"{server.url}/ui/runs/{r['id']}", cookies=cookies, timeout=30) for r in (doubt[0], declared[0])]
    assert [p.status_code for p in pages] == [200, 200]
    assert 'id="inputs-declared"' not in pages[0].text and 'id="inputs-declared"' in pages[1].text

    # the run lists and the compare page leave out the SNRs of a run in doubt, and say so
    model = httpx.get(f"{server.url}/ui/models/near", cookies=cookies, timeout=30).text
    rows = {int(m.group(1)): m.group(2) for m in re.finditer(r'<tr data-run="(\d+)">(.*?)</tr>', model, re.S)}
    assert all("other inputs?" in rows[r["id"]] for r in doubt)
    assert not any("other inputs?" in rows[r["id"]] for r in declared)
    compare = httpx.get(f"{server.url}/ui/models/mixed/compare", params={"by": "dev"}, cookies=cookies, timeout=30)
    assert compare.status_code == 200 and 'id="inputs-in-doubt"' in compare.text
    cells = re.findall(r"<tr><td>layer_norm</td>(.*?)</tr>", compare.text, re.S)[0]
    snrs = re.findall(r'<td class="num [^"]*"[^>]*>([^<]*)</td>', cells)
    assert snrs[0] == "—" and float(snrs[1]) > 30, snrs  # dev a: left out; dev b: its layer's SNR

    etrecord, etdump, debug_buffer = _files()
    code = main(["submit", "--server", server.url, "--token", token, "--model", "near", "--etrecord", str(etrecord),
                 "--etdump", str(etdump), "--debug-buffer", str(debug_buffer), "--inputs-are-representative"])
    assert code == 0 and json.loads(capsys.readouterr().out)["inputs_are_representative"] is True


@pytest.mark.parametrize(("value", "status", "declared"), [
    ("true", 201, True), ("ON", 201, True), ("0", 201, False), ("", 201, False), ("maybe", 422, None)])
def test_the_upload_field_says_yes_or_no(sqlite_server: Server, value: str, status: int, declared: bool | None) -> None:
    server = sqlite_server
    token = server.token("declared-field")
    etrecord, etdump, _ = _files()
    with open(etrecord, "rb") as rec, open(etdump, "rb") as dump:
        r = httpx.post(f"{server.url}/api/v1/runs", headers={"Authorization": f"Bearer {token}"}, timeout=60,
                       data={"model": "near", "inputs_are_representative": value},
                       files={"etrecord": ("etrecord.bin", rec), "etdump": ("etdump.etdp", dump)})
    assert r.status_code == status, r.text
    if declared is None:
        assert "say true or false" in r.json()["detail"] and "'maybe'" in r.json()["detail"]
    else:
        assert r.json()["inputs_are_representative"] is declared


def test_a_run_uploaded_with_its_own_inputs_is_judged_on_them(server: Server, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    token = server.token("own-inputs")
    inputs = folder("culprit_near_inputs") / "run_inputs.pt"
    with Client(server.url, token) as client:
        runs = [client.wait(client.submit("near", *_files(), {"n": str(i)}, step_inputs=inputs)["id"])
                for i in range(2)]
        assert [r["status"] for r in runs] == ["done", "done"], [r.get("reason") for r in runs]
        assert runs[0]["artifacts"]["step_inputs"] == hashlib.sha256(inputs.read_bytes()).hexdigest()
        assert runs[0]["inputs_are_representative"] is False
        culprits = client.analysis(runs[0]["id"])["culprits"]
        assert culprits["inputs_in_doubt"] == [] and culprits["inputs_note"] is None
        assert not any(r["is_culprit"] for r in culprits["rows"]) and not culprits["not_judged"]
        assert culprits["decode"] is None  # one run on its own inputs: no decode view
        gap = client.analysis(runs[0]["id"])["gap"]  # the gap stage's reference ran on them too
        assert gap["notes"][0].startswith("the reference graph ran on the run's own inputs")
        assert min(min(r["snr"]) for r in gap["rows"]) > 130  # within float noise, where other inputs gave ~38 dB
        gated = client.compare(runs[1]["id"], runs[0]["id"])
        assert gated["passed"] is True and gated["diff"]["error_not_compared"] is None

        # a file that is not a list of input tuples fails the run, naming the upload (not where it is stored)
        (tmp_path / "inputs.pt").write_bytes(b"PK\x03\x04 not really a torch.save archive")
        wrong = client.wait(client.submit("near", *_files(), step_inputs=tmp_path / "inputs.pt")["id"])
        assert wrong["status"] == "failed" and wrong["reason"].startswith("bad input: "), wrong["reason"]
        assert "<step_inputs>" in wrong["reason"] and str(server.data) not in wrong["reason"], wrong["reason"]

        with pytest.raises(ServiceInputError, match="give one of them"):
            client.submit("near", *_files(), step_inputs=inputs, inputs_are_representative=True)

    etrecord, etdump, debug_buffer = _files()
    code = main(["submit", "--server", server.url, "--token", token, "--model", "near", "--etrecord", str(etrecord),
                 "--etdump", str(etdump), "--debug-buffer", str(debug_buffer), "--step-inputs", str(inputs), "--wait"])
    submitted = json.loads(capsys.readouterr().out)
    assert code == 0 and submitted["status"] == "done" and submitted["artifacts"]["step_inputs"] == \
        runs[0]["artifacts"]["step_inputs"]

    page = httpx.get(f"{server.url}/ui/runs/{runs[0]['id']}", cookies=sign_in(server.url, token), timeout=30)
    assert page.status_code == 200 and 'id="step-inputs"' in page.text and runs[0]["artifacts"]["step_inputs"] in page.text
