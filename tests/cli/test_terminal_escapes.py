"""Text from files reaches the terminal with its control characters escaped (issue 22, item 5).

An event name in an ETDump, a module path in a gap table, a warning or an error quoting a file can
hold escape sequences that retitle the terminal (OSC 0), write the clipboard (OSC 52), clear it
(CSI 2J), overwrite a line (CR) or reorder it (bidi overrides). Each path is fed such text and the
printed characters are checked.
"""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

import pandas as pd
import pytest

from numdiff._core.terminal import printable
from numdiff.cli import main
from numdiff.examples import example_files

EXAMPLE = example_files("quantized_mlp")
EVIL = "op\x1b]0;pwned\x07\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\rALL OK\u202e\x9b31m"
ESCAPED = "op\\x1b]0;pwned\\x07\\x1b]52;c;cm0gLXJmIH4=\\x07\\x1b[2J\\rALL OK\\u202e\\x9b31m"


def _assert_no_controls(text: str) -> None:
    bad = [c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F or c in "\u202e\u2066"]
    assert not bad, repr(text)


def test_printable() -> None:
    assert printable(EVIL) == ESCAPED
    assert printable("a\nb\tc") == "a\nb\tc"
    assert printable("a\nb\tc", newlines=False) == "a\\nb\\tc"
    assert printable("café ∞ 日本 — ok") == "café ∞ 日本 — ok"  # only controls change
    assert printable("\x00\x7f\u2028\u2066") == "\\x00\\x7f\\u2028\\u2066"


def test_profile_table_escapes_event_block_and_delegate_names() -> None:
    from numdiff.report.profile_table import render_profile_table

    df = pd.DataFrame([
        {"event_block_name": "Execute\x1b[2J", "event_name": EVIL, "raw": [0.5], "p50 (ms)": 0.5, "avg (ms)": 0.5,
         "delegate_backend_name": "Xnn\x1b]52;c;eA==\x07"},
        {"event_block_name": "Execute\x1b[2J", "event_name": "Method::execute", "raw": [1.0], "p50 (ms)": 1.0,
         "avg (ms)": 1.0, "delegate_backend_name": None}])
    text = render_profile_table(df, "ms", width=400)
    _assert_no_controls(text)
    assert ESCAPED in text and "Execute\\x1b[2J (1 run)" in text and "Xnn\\x1b]52;c;eA==\\x07" in text


def _evil_etdump(tmp_path: Path) -> Path:
    """The example's ETDump with every event renamed to text that drives a terminal."""
    from numdiff.schema.etdump import Event, RunDoc, read_etdump
    from numdiff.schema.etdump.writer import write_etdump

    doc = read_etdump(EXAMPLE.etdump.read_bytes()).to_doc()
    runs = []
    for run in doc.run_data:
        events = [Event(profile_event=dataclasses.replace(ev.profile_event, name=EVIL))
                  if ev.profile_event is not None and ev.profile_event.name not in (None, "Method::execute") else ev
                  for ev in run.events or ()]
        runs.append(RunDoc(run.name, events, run.bundled_input_index, tuple(run.allocators)))
    path = tmp_path / "evil.etdp"
    path.write_bytes(write_etdump(dataclasses.replace(doc, run_data=runs)))
    return path


@pytest.mark.parametrize("extra", [[], ["--full"]])
def test_numdiff_profile_escapes_event_names(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            extra: list[str]) -> None:
    assert main(["profile", "--etdump", str(_evil_etdump(tmp_path)), *extra]) == 0
    out = capsys.readouterr().out
    _assert_no_controls(out)
    assert "\\x1b]0;pwned\\x07" in out


def test_gap_table_escapes_ops_and_module_paths() -> None:
    from numdiff.report.gap_table import render_gap_table

    df = pd.DataFrame([{"aot_debug_handle": (1,), "aot_ops": [EVIL], "runtime_ops": ["native\x1b[2J"],
                        "aot_intermediate_output": 1.0, "gap": [12.0], "stacktraces": None}])
    text = render_gap_table(df, "SNR", module_paths={EVIL: "blocks.0\x1b]0;x\x07"})
    _assert_no_controls(text)
    assert "\\x1b]0;pwned" in text and "native\\x1b[2J" in text and "blocks.0\\x1b]0;x\\x07" in text


def test_warnings_are_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    from numdiff.cli._console import cli_warnings

    for debug in (False, True):
        with cli_warnings("numdiff profile", debug=debug):
            with warnings.catch_warnings():
                warnings.simplefilter("always")
                warnings.warn(f"event {EVIL} has no debug handle\nsecond line \x1b[2J", UserWarning, stacklevel=1)
        err = capsys.readouterr().err
        _assert_no_controls(err)
        assert "\\x1b]0;pwned\\x07" in err


def test_error_lines_are_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / f"{EVIL}.etdp"
    bad.write_bytes(b"\x1b]0;file bytes\x07 not an etdump")
    assert main(["profile", "--etdump", str(bad)]) == 3
    err = capsys.readouterr().err
    _assert_no_controls(err)
    assert "\\x1b]0;pwned" in err


def test_an_internal_errors_message_is_escaped(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError(EVIL)

    monkeypatch.setattr("numdiff.inspector.Inspector.__init__", boom)
    assert main(["profile", "--etdump", str(EXAMPLE.etdump)]) == 4
    err = capsys.readouterr().err
    _assert_no_controls(err)
    assert "RuntimeError: op\\x1b]0;pwned\\x07" in err  # CR breaks the line: shown as " | "
