"""The numerical gap of a multi-method program (real oracle artifact: tests/fixtures/realistic/real_two_methods).

encode = tanh(Linear(8,4)) on (2,8), forward = sigmoid(Linear(4,8)) on (2,4), both run by the
runtime. The reference cannot open this ETRecord (its Edge programs are a dict); its
representative inputs are encode's and its ATen program is forward's. numdiff compares both
methods, each on inputs that fit it, and tags every row with its method.
"""

from __future__ import annotations

import math
import warnings

import pytest

from numdiff import Inspector
from numdiff.errors import UsageError
from numdiff.gap.methods import fits
from tests.conftest import FIXTURES

FOLDER = FIXTURES / "realistic" / "real_two_methods"


@pytest.fixture(scope="module")
def inspector() -> Inspector:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Inspector(etdump_path=FOLDER / "etdump.etdp", etrecord=FOLDER / "etrecord.bin",
                         debug_buffer_path=FOLDER / "debug_buffer.bin")


def test_every_method_is_compared_and_rows_name_their_method(inspector: Inspector) -> None:
    with pytest.warns(UserWarning, match="multi-method program"):
        df = inspector.calculate_numeric_gap("SNR")
    assert list(df["method"]) == ["forward", "forward", "encode", "encode"]
    assert [ops[-1] for ops in df["aot_ops"]] == ["linear", "sigmoid", "aten_addmm_default", "aten_tanh_default"]
    assert [r[0] for r in df["runtime_ops"]] == ["native_call_addmm.out", "native_call_sigmoid.out",
                                                 "native_call_addmm.out", "native_call_tanh.out"]
    assert all(g[0] > 130 or math.isinf(g[0]) for g in df["gap"])  # fp32 portable kernels: rounding only
    notes = df.attrs["numdiff_notes"]
    assert "method 'forward': 2 rows on 'exported_program', inputs from the method's example inputs" in notes[0]
    assert "method 'encode': 2 rows on 'edge_dialect_exported_program/encode', inputs from the ETRecord's " \
           "representative inputs" in notes[1]
    assert list(df.columns)[:8] == ["aot_debug_handle", "aot_ops", "aot_intermediate_output", "runtime_ops",
                                    "runtime_debug_handle", "runtime_intermediate_output", "gap", "stacktraces"]


def test_reference_graph_choices(inspector: Inspector) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        edge = inspector.calculate_numeric_gap("SNR", reference_graph="edge_dialect_exported_program")
        aten = inspector.calculate_numeric_gap("SNR", reference_graph="exported_program")
    assert list(edge["method"]) == ["forward", "forward", "encode", "encode"]
    assert list(aten["method"]) == ["forward", "forward"]
    assert any("'encode': not compared (the ETRecord's ATen exported_program is forward's" in n
               for n in aten.attrs["numdiff_notes"])
    with pytest.raises(UsageError, match="reference graph 'nope/forward' not found in the ETRecord"):
        inspector.calculate_numeric_gap("SNR", reference_graph="nope")


def test_inputs_are_matched_by_signature(inspector: Inspector) -> None:
    programs = inspector._etrecord.edge_programs
    (encode_inputs,) = inspector._etrecord._representative_inputs
    assert fits(programs["encode"], encode_inputs) and not fits(programs["forward"], encode_inputs)


def test_numeric_gap_report_says_it_compares_one_method(inspector: Inspector) -> None:
    # before: CaptureError "mat1 and mat2 shapes cannot be multiplied ... Check that the inputs match the
    # graph's placeholders", a false hint (the inputs are encode's, the graph forward's)
    with pytest.raises(UsageError, match=r"numeric_gap_report compares one method's graph, and this program has "
                       r"several\nUse calculate_numeric_gap \(CLI: numdiff gap --drop-in\)"):
        inspector.numeric_gap_report("SNR")


def test_methods_left_out_are_read_back_from_the_notes() -> None:
    from numdiff.gap.methods import methods_left_out

    notes = ["method 'forward': 2 rows on 'exported_program', inputs from the method's example inputs",
             "method 'encode': not compared (the ETDump has no run of it)",
             "[encode] method 'x': not compared (quoted inside another note)"]
    assert methods_left_out(notes) == ["encode"]
