"""The service client against a malicious server (issue 22, items 5 and 10), on httpx's MockTransport.

`numdiff fetch-report` caps the report's size (--max-bytes), streams it to a private temporary file
that replaces the output only when the whole body arrived, and exits non-zero on a redirect, a short
or an empty body. Text the server sends (error details, a run's failure reason) reaches the terminal
with its control characters escaped.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from numdiff.cli import main

httpx = pytest.importorskip("httpx")

SERVER = ["--server", "http://numdiff.test", "--token", "t"]
EVIL = "\x1b]0;pwned\x07\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\rALL OK\u202e"


def _serve(monkeypatch: pytest.MonkeyPatch, answer: Callable[[httpx.Request], httpx.Response]) -> None:
    """Make the CLI's client talk to ``answer`` instead of the network."""
    import numdiff.client
    from numdiff.service.client import Client

    monkeypatch.setattr(numdiff.client, "Client",
                        functools.partial(Client, transport=httpx.MockTransport(answer)))


def _assert_no_controls(text: str) -> None:
    assert not any(c in text for c in "\x1b\x07\r\u202e"), repr(text)


def test_report_is_written(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _serve(monkeypatch, lambda request: httpx.Response(200, content=b"<html>report</html>"))
    out = tmp_path / "report.html"
    assert main(["fetch-report", *SERVER, "7", "-o", str(out)]) == 0
    assert out.read_bytes() == b"<html>report</html>"
    assert sorted(os.listdir(tmp_path)) == ["report.html"]  # no temporary file left behind


def test_a_huge_report_is_cut_off_at_the_cap(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    sent = []

    def endless() -> Iterator[bytes]:
        for _ in range(10_000):  # 640 MB if it were all read
            sent.append(1)
            yield b"x" * 65536

    _serve(monkeypatch, lambda request: httpx.Response(200, content=endless()))
    out = tmp_path / "report.html"
    assert main(["fetch-report", *SERVER, "7", "-o", str(out), "--max-bytes", "1000000"]) == 4
    assert "over the 1000000-byte cap" in capsys.readouterr().err
    assert len(sent) < 20  # stopped reading at the cap
    assert os.listdir(tmp_path) == []  # nothing written, no temporary file left


def test_an_announced_size_over_the_cap_is_refused_before_reading(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    from numdiff.service.client import Client, ServiceError

    answer = httpx.Response(200, headers={"content-length": str(2 << 30)}, content=b"x" * 10)
    with Client("http://numdiff.test", "t", transport=httpx.MockTransport(lambda r: answer)) as client:
        with pytest.raises(ServiceError, match="announces 2147483648 bytes"):
            client.fetch_report(7, tmp_path / "r.html", max_bytes=1 << 20)
    assert os.listdir(tmp_path) == []


def test_a_redirect_is_an_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    _serve(monkeypatch, lambda request: httpx.Response(302, headers={"location": "http://evil.test/r"}))
    out = tmp_path / "report.html"
    assert main(["fetch-report", *SERVER, "7", "-o", str(out)]) == 4
    assert "redirect (HTTP 302 to http://evil.test/r)" in capsys.readouterr().err
    assert not out.exists()
    _serve(monkeypatch, lambda request: httpx.Response(302, headers={"location": "http://evil.test/\x1b[2J"}))
    assert main(["fetch-report", *SERVER, "7", "-o", str(out)]) != 0  # httpx refuses that Location itself
    _assert_no_controls(capsys.readouterr().err)
    assert not out.exists()


@pytest.mark.parametrize(("headers", "body", "match"), [
    ({"content-length": "1000"}, b"<html>cut", "sent 9 of the 1000 bytes"),
    ({}, b"", "empty report"),
])
def test_a_short_or_empty_body_is_an_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str], headers: dict[str, str],
                                           body: bytes, match: str) -> None:
    _serve(monkeypatch, lambda request: httpx.Response(200, headers=headers, content=body))
    out = tmp_path / "report.html"
    out.write_text("the previous report")
    assert main(["fetch-report", *SERVER, "7", "-o", str(out)]) == 4
    assert match in capsys.readouterr().err
    assert out.read_text() == "the previous report"  # left as it was
    assert os.listdir(tmp_path) == ["report.html"]


def test_a_symlink_at_the_output_is_replaced_not_followed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    out = tmp_path / "report.html"
    out.symlink_to(victim)
    for name in (".report.html.part", "report.html.tmp", "report.html.part"):  # fixed names an attacker may plant
        (tmp_path / name).symlink_to(victim)
    _serve(monkeypatch, lambda request: httpx.Response(200, content=b"<html>report</html>"))
    assert main(["fetch-report", *SERVER, "7", "-o", str(out)]) == 0
    assert victim.read_text() == "precious"
    assert not out.is_symlink() and out.read_bytes() == b"<html>report</html>"


def test_max_bytes_must_be_positive(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fetch-report", *SERVER, "7", "-o", str(tmp_path / "r.html"), "--max-bytes", "0"]) == 2
    assert "--max-bytes 0: give a positive number" in capsys.readouterr().err


# --- terminal escapes from the server -------------------------------------------------------------

def test_a_servers_error_text_is_escaped(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _serve(monkeypatch, lambda request: httpx.Response(500, json={"detail": EVIL}))
    assert main(["runs", "show", *SERVER, "7"]) == 4
    err = capsys.readouterr().err
    _assert_no_controls(err)
    assert "\\x1b]0;pwned\\x07\\x1b]52;c;cm0gLXJmIH4=\\x07\\x1b[2J\\rALL OK\\u202e" in err


def test_a_servers_plain_text_error_is_escaped(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    _serve(monkeypatch, lambda request: httpx.Response(401, text=EVIL))
    assert main(["runs", "list", *SERVER]) == 5
    _assert_no_controls(capsys.readouterr().err)


@pytest.mark.parametrize("command", [["runs", "show", *SERVER, "7", "--wait"]])
def test_a_runs_failure_reason_is_escaped(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                          command: list[str]) -> None:
    _serve(monkeypatch, lambda request: httpx.Response(200, json={"id": 7, "status": "failed", "reason": EVIL}))
    assert main(command) == 3
    captured = capsys.readouterr()
    _assert_no_controls(captured.err)
    _assert_no_controls(captured.out)  # the JSON on stdout escapes them itself
    assert "run 7 failed: \\x1b]0;pwned\\x07" in captured.err


def test_submit_wait_failure_reason_is_escaped(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("m.etrecord", "r.etdp"):
        (tmp_path / name).write_bytes(b"x")
    _serve(monkeypatch, lambda request: httpx.Response(200, json={"id": 7, "status": "failed", "reason": EVIL}))
    assert main(["submit", *SERVER, "--model", "m", "--etrecord", str(tmp_path / "m.etrecord"),
                 "--etdump", str(tmp_path / "r.etdp"), "--wait"]) == 3
    captured = capsys.readouterr()
    _assert_no_controls(captured.err + captured.out)
