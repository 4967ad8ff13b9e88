"""The CLI's error contract: one line on stderr, a documented exit status, a traceback only with --debug."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable

import pytest

from numdiff.cli import _exit, build_parser, main
from numdiff.errors import (
    CaptureError,
    ComparatorError,
    DebugBufferError,
    ETDumpError,
    ETRecordError,
    InternalError,
    MismatchedArtifactsError,
    MissingDataError,
    NumdiffError,
    UnknownNameError,
    UsageError,
)
from tests.conftest import FIXTURES

MLP = FIXTURES / "mlp_fp32"
PROFILE = ["profile", "--etdump", str(MLP / "etdump.etdp")]


def _patch_profile(monkeypatch: pytest.MonkeyPatch, raiser: Callable[[argparse.Namespace], int]) -> None:
    """Make `numdiff profile` run `raiser` instead of the real command."""
    from numdiff.cli import profile

    monkeypatch.setattr(profile, "run", raiser)


def _raising(error: BaseException) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        raise error

    return run


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (ETDumpError("x.etdp", "truncated", "Copy the whole file."), _exit.BAD_INPUT),
        (DebugBufferError("d.bin", "tensor past the end"), _exit.BAD_INPUT),
        (ETRecordError("r.bin", "not a zip"), _exit.BAD_INPUT),
        (MismatchedArtifactsError("different models"), _exit.BAD_INPUT),
        (MissingDataError("no debug buffer"), _exit.BAD_INPUT),
        (CaptureError("node add failed"), _exit.BAD_INPUT),
        (ComparatorError("hook failed"), _exit.BAD_INPUT),
        (UsageError("bad metric"), _exit.USAGE),
        (UnknownNameError("no graph 'g'"), _exit.USAGE),
        (NumdiffError("something numdiff refused"), _exit.BAD_INPUT),
    ],
)
def test_numdiff_errors_map_to_documented_codes(error: NumdiffError, code: int, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    _patch_profile(monkeypatch, _raising(error))
    assert main(PROFILE) == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("numdiff profile: error: "), err
    assert "Traceback" not in err


def test_an_error_may_choose_its_code(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    class Unreachable(NumdiffError):
        exit_code = _exit.UNREACHABLE

    class Nonsense(NumdiffError):
        exit_code = 77  # not a documented status: ignored

    _patch_profile(monkeypatch, _raising(Unreachable("server at http://x:1 did not answer")))
    assert main(PROFILE) == _exit.UNREACHABLE
    _patch_profile(monkeypatch, _raising(Nonsense("?")))
    assert main(PROFILE) == _exit.BAD_INPUT


def test_multi_line_messages_become_one_line(monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    _patch_profile(monkeypatch, _raising(ETDumpError("x.etdp", "the table at byte 8 is cut", "Copy the whole file.")))
    assert main(PROFILE) == _exit.BAD_INPUT
    err = capsys.readouterr().err
    assert err == "numdiff profile: error: ETDump 'x.etdp': the table at byte 8 is cut | Copy the whole file.\n"


@pytest.mark.parametrize("error", [KeyError("run"), TypeError("'NoneType' object is not subscriptable"),
                                   RecursionError("maximum recursion depth exceeded"), MemoryError()])
def test_any_other_exception_is_an_internal_error(error: Exception, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    _patch_profile(monkeypatch, _raising(error))
    assert main(PROFILE) == _exit.INTERNAL
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"numdiff profile: internal error: {type(error).__name__}")
    assert re.search(r"this is a bug in numdiff: please report it.*re-run with --debug", err), err


def test_internal_error_from_numdiff_says_it_is_a_bug(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    _patch_profile(monkeypatch, _raising(InternalError("event table lost a row")))
    assert main(PROFILE) == _exit.INTERNAL
    err = capsys.readouterr().err
    assert "internal error: event table lost a row" in err and "this is a bug" in err


def test_a_huge_unexpected_message_is_cut(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _patch_profile(monkeypatch, _raising(ValueError("x" * 100_000)))
    assert main(PROFILE) == _exit.INTERNAL
    err = capsys.readouterr().err
    assert len(err) < 1000 and "x ..." in err


def test_an_unprintable_exception_still_gives_one_line(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    _patch_profile(monkeypatch, _raising(Unprintable()))
    assert main(PROFILE) == _exit.INTERNAL
    assert "internal error: Unprintable: (message unavailable)" in capsys.readouterr().err


@pytest.mark.parametrize("flag_first", [True, False])
@pytest.mark.parametrize("flag", ["--debug", "--verbose"])
def test_debug_shows_the_traceback(flag: str, flag_first: bool, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    _patch_profile(monkeypatch, _raising(KeyError("boom")))
    argv = [flag, *PROFILE] if flag_first else [*PROFILE, flag]
    assert main(argv) == _exit.INTERNAL
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "KeyError: 'boom'" in err
    assert err.rstrip().splitlines()[-1].startswith("numdiff profile: internal error: KeyError")


def test_debug_traceback_for_a_numdiff_error(monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    _patch_profile(monkeypatch, _raising(ETRecordError("r.bin", "not a zip")))
    assert main(["--debug", *PROFILE]) == _exit.BAD_INPUT
    assert "Traceback" in capsys.readouterr().err


def test_keyboard_interrupt_exits_130(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _patch_profile(monkeypatch, _raising(KeyboardInterrupt()))
    assert main(PROFILE) == _exit.INTERRUPTED == 130
    assert capsys.readouterr().err == "numdiff profile: interrupted\n"


def test_broken_pipe_exits_0_quietly(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _patch_profile(monkeypatch, _raising(BrokenPipeError()))
    assert main(PROFILE) == _exit.OK
    assert capsys.readouterr().err == ""


def test_real_bad_input_exits_3(tmp_path: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "--etdump", str(MLP / "debug_buffer.bin")]) == _exit.BAD_INPUT
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "debug_buffer.bin" in err


def test_help_documents_every_exit_status() -> None:
    text = build_parser().format_help()
    for code in (0, 1, 2, 3, 4, 5, 6, 130):
        assert re.search(rf"^  {code} +\S", text, re.MULTILINE), code
    assert "--debug" in text and "--verbose" in text


def test_exit_constants_are_distinct_and_documented() -> None:
    codes = [_exit.OK, _exit.CHECK_FAILED, _exit.USAGE, _exit.BAD_INPUT, _exit.INTERNAL, _exit.AUTH,
             _exit.UNREACHABLE, _exit.INTERRUPTED]
    assert codes == [0, 1, 2, 3, 4, 5, 6, 130]
    for code in codes:
        assert re.search(rf"^{code} +``", _exit.__doc__ or "", re.MULTILINE), code


def test_debug_is_accepted_after_any_command_and_view() -> None:
    parser = build_parser()
    assert parser.parse_args(["fleet", "summary", "out", "--debug"]).debug is True
    assert parser.parse_args(["--verbose", "fleet", "summary", "out"]).debug is True
    assert parser.parse_args(["gap", "--etdump", "e", "--etrecord", "r", "--debug-buffer", "d", "--verbose"]).debug
    assert parser.parse_args(["profile", "--etdump", "e"]).debug is False
