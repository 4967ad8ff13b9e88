"""Found by the 100k fuzz campaigns: an oversized program JSON, a malformed from_node on the ATen
program, a repeated graph input, and an Edge program whose node list was repeated 1,000 times.

A 483 MB program JSON took over 8 s to parse: programs over ``max_program_json_bytes`` are refused
from the zip directory's declared size, before reading. A ``from_node`` that is not JSON surfaced
as a bare ProgramLoadError without the file's name from ``calculate_numeric_gap``; it is an
ETRecordError naming the file and the program now.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from numdiff.errors import ETRecordError
from numdiff.inspector import Inspector
from numdiff.limits import use_limits
from numdiff.schema.etrecord import parse_etrecord
from tests.conftest import FIXTURES
from tests.security.hostile import ATEN, EDGE, craft, nodes


def test_a_program_json_over_the_limit_is_refused_before_parsing() -> None:
    record = FIXTURES / "mlp_fp32" / "etrecord.bin"
    with use_limits(max_program_json_bytes=2000), pytest.raises(
            ETRecordError, match=r"etrecord\.bin': entry 'exported_program': the program is \d+ bytes of JSON, "
                                 r"more than the limit 2000 bytes \(max_program_json_bytes\)\n.*"
                                 r"NUMDIFF_MAX_PROGRAM_JSON_BYTES="):
        parse_etrecord(record)
    assert parse_etrecord(record).exported_program is not None  # the default limit takes real programs


def test_malformed_from_node_names_the_file(tmp_path: Path) -> None:
    def mutate(program: dict) -> None:  # type: ignore[type-arg]
        for node in nodes(program):
            node.setdefault("metadata", {})["from_node"] = ""  # empty: passes the graph check, not JSON

    hostile = craft(tmp_path, ATEN, mutate)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        inspector = Inspector(etdump_path=FIXTURES / "mlp_fp32" / "etdump.etdp", etrecord=hostile,
                              debug_buffer_path=FIXTURES / "mlp_fp32" / "debug_buffer.bin")
    with pytest.raises(ETRecordError, match=r"hostile_mlp_fp32\.etrecord.: exported_program: malformed from_node metadata"):
        inspector.calculate_numeric_gap("SNR")


def test_a_graph_input_listed_twice_is_a_named_error(tmp_path: Path) -> None:
    # second campaign: torch.fx generated `def forward(self, p_fc1_weight, p_fc1_weight, ...)` -> SyntaxError
    def mutate(program: dict) -> None:  # type: ignore[type-arg]
        inputs = program["graph_module"]["graph"]["inputs"]
        inputs.insert(1, inputs[0])

    hostile = craft(tmp_path, ATEN, mutate)
    with pytest.raises(ETRecordError, match=r"hostile_mlp_fp32\.etrecord'.*exported_program.*graph input '\w+' is listed twice"):
        _ = parse_etrecord(hostile).exported_program


def test_a_repeated_node_name_is_refused_when_the_inspector_opens(tmp_path: Path) -> None:
    # second campaign: the Edge program's nodes repeated to 50k (78 MB) took 8 s to be accepted
    def mutate(program: dict) -> None:  # type: ignore[type-arg]
        nodes(program).append(dict(nodes(program)[0]))

    hostile = craft(tmp_path, EDGE, mutate)
    with pytest.raises(ETRecordError, match=r"hostile_mlp_fp32\.etrecord'.*Edge program 'forward': node \d+ repeats "
                                            r"the name '\w+' of an earlier node"):
        Inspector(etdump_path=FIXTURES / "mlp_fp32" / "etdump.etdp", etrecord=hostile)
