"""On a base install (no extras), every command that needs one names it and exits with status 2.

The base install is simulated by making the extra's packages fail to import (``sys.modules[name] = None``
is what Python itself uses for "not importable") and by dropping numdiff's modules that import them,
so that each command really goes down its import path.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from numdiff.cli import _exit, main
from numdiff.cli._extras import PACKAGES
from numdiff.examples import example_files

EXAMPLE = example_files("quantized_mlp")
ROOT = Path(__file__).resolve().parents[2]  # the clone numdiff is installed from (editable)
SERVER = ["--server", "http://127.0.0.1:9", "--token", "t"]


def _base_install(monkeypatch: pytest.MonkeyPatch, extra: str) -> None:
    blocked = PACKAGES[extra]
    for name in list(sys.modules):
        top = name.split(".", 1)[0]
        if top in blocked or name.startswith(("numdiff.service", "numdiff.client")):
            monkeypatch.delitem(sys.modules, name)
    for top in blocked:
        monkeypatch.setitem(sys.modules, top, None)


def _commands(tmp: Path) -> list[tuple[str, list[str], str]]:
    manifest = tmp / "fleet.csv"
    manifest.write_text(f"run,etdump\nr1,{EXAMPLE.etdump}\n")
    return [
        ("service", ["serve", "--data", str(tmp / "data")], "numdiff serve"),
        ("service", ["admin", "create-token", "--data", str(tmp / "data"), "--project", "p"], "numdiff admin"),
        ("service", ["admin", "revoke-token", "--data", str(tmp / "data"), "ndt_x"], "numdiff admin"),
        ("client", ["submit", *SERVER, "--model", "m", "--etrecord", str(EXAMPLE.etrecord),
                    "--etdump", str(EXAMPLE.etdump)], "numdiff submit"),
        ("client", ["runs", "list", *SERVER], "numdiff runs list"),
        ("client", ["runs", "show", *SERVER, "1"], "numdiff runs show"),
        ("client", ["runs", "compare", *SERVER, "2", "--base", "1"], "numdiff runs compare"),
        ("client", ["runs", "baseline", *SERVER, "mlp", "1"], "numdiff runs baseline"),
        ("client", ["fetch-report", *SERVER, "1", "-o", str(tmp / "r.html")], "numdiff fetch-report"),
        ("report", ["report", "--etdump", str(EXAMPLE.etdump), "-o", str(tmp / "r.html")], "numdiff report"),
        ("batch", ["batch", str(manifest), "-o", str(tmp / "out")], "numdiff batch"),
        ("batch", ["fleet", "summary", str(tmp / "out")], "numdiff fleet"),
        ("ray", ["batch", str(manifest), "-o", str(tmp / "out"), "--backend", "ray"], "numdiff batch --backend ray"),
        ("explorer", ["explore", "--etdump", str(EXAMPLE.etdump), "--etrecord", str(EXAMPLE.etrecord),
                      "-o", str(tmp / "overlays"), "--open"], "--open"),
    ]


_IDS = ["serve", "admin-create", "admin-revoke", "submit", "runs-list", "runs-show", "runs-compare",
        "runs-baseline", "fetch-report", "report", "batch", "fleet", "batch-ray", "explore-open"]


@pytest.mark.parametrize("index", range(len(_IDS)), ids=_IDS)
def test_a_missing_extra_is_named(index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    extra, argv, what = _commands(tmp_path)[index]
    _base_install(monkeypatch, extra)
    assert main(argv) == _exit.USAGE == 2
    err = capsys.readouterr().err
    pip_extra = "service" if extra == "client" else extra
    assert err.count("\n") == 1 and "internal error" not in err, err
    assert what in err and f"pip install -c constraints.txt -e '.[{pip_extra}]'" in err, err
    assert not (tmp_path / "out").exists()  # nothing was analysed before the check


def test_a_late_missing_package_still_names_its_extra(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from numdiff.cli import trace

    def run(args: object) -> int:
        import sqlalchemy  # noqa: F401 - stands for any optional import deep in a command

        return 0

    monkeypatch.setattr(trace, "run", run)
    monkeypatch.setitem(sys.modules, "sqlalchemy", None)
    monkeypatch.chdir(ROOT)  # in numdiff's clone: the README's command as it is
    assert main(["trace", "x.json", "-o", "t.json"]) == _exit.USAGE
    err = capsys.readouterr().err
    assert err == ("numdiff trace: error: numdiff trace needs the optional package 'sqlalchemy', which is not "
                   "installed | Install it with: pip install -c constraints.txt -e '.[service]'\n")


def test_the_hint_says_where_to_run_it_from_another_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Run from elsewhere, the command first goes to numdiff's clone ('.[service]' means that folder)."""
    import shlex

    _base_install(monkeypatch, "client")
    monkeypatch.chdir(tmp_path)
    assert main(["runs", "list", *SERVER]) == _exit.USAGE
    err = capsys.readouterr().err
    assert err.endswith(f"Install it with: cd {shlex.quote(str(ROOT))} && pip install -c constraints.txt -e "
                        "'.[service]'\n"), err


def test_a_missing_base_module_is_still_a_bug(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    from numdiff.cli import trace

    def run(args: object) -> int:
        raise ModuleNotFoundError("No module named 'numdiff.gone'", name="numdiff.gone")

    monkeypatch.setattr(trace, "run", run)
    assert main(["trace", "x.json", "-o", "t.json"]) == _exit.INTERNAL
    assert "internal error: ModuleNotFoundError" in capsys.readouterr().err


def test_runs_baseline_puts_the_models_baseline(monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    import json

    import httpx

    from numdiff.cli import _service
    from numdiff.client import Client

    seen: list[tuple[str, str, object]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, request.url.path, json.loads(request.content)))
        return httpx.Response(200, json={"name": "mlp", "baseline_run_id": 7})

    monkeypatch.setattr(_service, "client_from", lambda args: Client(args.server, args.token,
                                                                       transport=httpx.MockTransport(answer)))
    assert main(["runs", "baseline", *SERVER, "mlp", "7"]) == 0
    assert seen == [("PUT", "/api/v1/models/mlp/baseline", {"run_id": 7})]
    assert json.loads(capsys.readouterr().out) == {"name": "mlp", "baseline_run_id": 7}
