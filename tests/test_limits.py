"""numdiff.limits: defaults, environment variables, use_limits, and the messages for bad settings."""

from __future__ import annotations

from pathlib import Path

import pytest

import numdiff
from numdiff.errors import ETRecordError, UsageError
from numdiff.limits import Limits, current_limits, env_var, use_limits
from numdiff.schema.etrecord import parse_etrecord

SOURCE = Path(__file__).parent / "fixtures" / "mlp_fp32" / "etrecord.bin"


@pytest.fixture(autouse=True)
def _no_limit_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in Limits.__dataclass_fields__:
        monkeypatch.delenv(env_var(name), raising=False)


def test_defaults_and_public_names() -> None:
    assert current_limits() == Limits()
    assert numdiff.Limits is Limits and numdiff.use_limits is use_limits
    assert Limits().max_entry_bytes == 4 << 30 and Limits().max_entry_ratio == 200.0


def test_environment_variables_are_read_on_each_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NUMDIFF_MAX_NESTING_DEPTH", "7")
    monkeypatch.setenv("NUMDIFF_MAX_ENTRY_RATIO", "2.5")
    assert (current_limits().max_nesting_depth, current_limits().max_entry_ratio) == (7, 2.5)
    monkeypatch.setenv("NUMDIFF_MAX_NESTING_DEPTH", "9")
    assert current_limits().max_nesting_depth == 9


def test_use_limits_wins_over_the_environment_and_restores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NUMDIFF_MAX_ENTRIES", "10")
    with use_limits(max_entries=20) as limits:
        assert limits.max_entries == 20
        with use_limits(max_graph_nodes=5):
            assert (current_limits().max_entries, current_limits().max_graph_nodes) == (20, 5)
        assert current_limits().max_graph_nodes == Limits().max_graph_nodes
    assert current_limits().max_entries == 10


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: use_limits(max_bytes=1).__enter__(), r"unknown limit\(s\) \['max_bytes'\]\nKnown limits: \["),
        (lambda: use_limits(max_entries=0).__enter__(), r"limit max_entries must be a positive number, got 0"),
        (lambda: Limits(max_entry_ratio=-1.0), r"limit max_entry_ratio must be a positive number, got -1.0"),
    ],
    ids=["unknown", "zero", "negative"],
)
def test_bad_settings_are_usage_errors(call: object, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        call()  # type: ignore[operator]


def test_bad_environment_value_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NUMDIFF_MAX_ENTRY_BYTES", "4GB")
    with pytest.raises(UsageError, match=r"NUMDIFF_MAX_ENTRY_BYTES='4GB' is not a number\nSet it to a positive integer"):
        current_limits()


def test_a_real_file_is_refused_with_tiny_limits_and_read_with_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    with use_limits(max_entry_ratio=0.5), pytest.raises(ETRecordError, match=r"max_entry_ratio") as info:
        parse_etrecord(SOURCE)
    message = str(info.value)
    assert str(SOURCE) in message and "NUMDIFF_MAX_ENTRY_RATIO=" in message and "numdiff.use_limits(max_entry_ratio=" in message
    monkeypatch.setenv("NUMDIFF_MAX_NESTING_DEPTH", "3")
    with pytest.raises(ETRecordError, match=r"nested at least \d+ deep, more than the limit 3 \(max_nesting_depth\)"):
        parse_etrecord(SOURCE).check_programs()
    monkeypatch.delenv("NUMDIFF_MAX_NESTING_DEPTH")
    assert parse_etrecord(SOURCE).op_nodes()
