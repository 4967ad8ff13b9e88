"""compare_runs on oracle runs of one program: the op where a run parts from the base, the side that
departs from the reference, the scale of a scaled run, and files of another program refused."""

from __future__ import annotations

import pytest
import torch

from numdiff.errors import MismatchedArtifactsError, MissingDataError, UsageError
from numdiff.runs_compare import Agreement, RunFiles, Side, compare_runs, relative_difference
from tests.runs_compare.conftest import FIXTURES, MLP, mlp_run

pytestmark = pytest.mark.filterwarnings("ignore")


@pytest.fixture(scope="module")
def three():  # type: ignore[no-untyped-def]
    return compare_runs(MLP / "etrecord.bin", {n: mlp_run(n) for n in ("base", "kernel", "scaled")})


def test_the_run_whose_kernel_differs_parts_at_that_op_and_departs(three, mlp_truth) -> None:  # type: ignore[no-untyped-def]
    kernel = three.runs["kernel"]
    first = kernel.first_divergent
    assert first is not None and list(first.aot_ops) == mlp_truth["runs"]["kernel"]["departs_at"]
    assert first.departs is Side.RUN and first.run_local.beyond_noise and not first.base_local.beyond_noise
    assert kernel.departs_from_reference and kernel.diverges
    before = kernel.ops[: first.index]
    assert before and all(op.verdict is Agreement.IDENTICAL for op in before)
    assert all(op.verdict is Agreement.INHERITS for op in kernel.ops[first.index + 1:])


def test_the_scaled_run_is_described_by_its_scale(three, mlp_truth) -> None:  # type: ignore[no-untyped-def]
    scaled = three.runs["scaled"]
    first = scaled.first_divergent
    assert first is not None and list(first.aot_ops) == mlp_truth["runs"]["scaled"]["departs_at"]
    assert first.departs is Side.RUN
    outputs = scaled.outputs
    assert outputs is not None and outputs.source == "program outputs" and outputs.beyond_noise
    assert outputs.fit.scale == pytest.approx(mlp_truth["runs"]["scaled"]["output_scale"], rel=1e-5)
    assert outputs.fit.r2 == pytest.approx(1.0, abs=1e-9)
    assert outputs.fit.words == "outputs are 0.50× the base's (half), R² 1.00"
    assert "outputs are 0.50× the base's (half), R² 1.00" in str(three)


def test_the_kernel_run_is_not_a_scale_and_flips_answers(three, mlp_truth) -> None:  # type: ignore[no-untyped-def]
    outputs = three.runs["kernel"].outputs
    assert outputs is not None and outputs.fit.words is None and outputs.fit.r2 < 0.9
    truth = mlp_truth["answers_agree_with_base"]
    assert outputs.answers_agree == truth["kernel"] == 0.5  # one of the two rows' argmax flips
    assert three.runs["scaled"].outputs.answers_agree == truth["scaled"] == 1.0  # halving keeps every answer
    assert "the outputs' argmax differs from the base's in 50% of rows" in str(three)


def test_with_the_deviant_run_as_base_the_base_departs(mlp_truth) -> None:  # type: ignore[no-untyped-def]
    result = compare_runs(MLP / "etrecord.bin", {"base": mlp_run("base"), "kernel": mlp_run("kernel")}, base="kernel")
    first = result.runs["base"].first_divergent
    assert first is not None and list(first.aot_ops) == mlp_truth["runs"]["kernel"]["departs_at"]
    assert first.departs is Side.BASE
    assert not result.runs["base"].departs_from_reference
    assert result.to_json()["base_departs_from_reference"] is True


def test_a_run_against_itself_agrees() -> None:
    result = compare_runs(MLP / "etrecord.bin", {"a": mlp_run("base"), "b": RunFiles(*mlp_run("base"))})
    run = result.runs["b"]
    assert not result.diverges and run.first_divergent is None and not run.departs_from_reference
    assert all(op.verdict is Agreement.IDENTICAL for op in run.ops)
    assert result.headline().endswith("every run agrees with the base within noise")


def test_json_has_the_shape_of_the_issue(three, mlp_truth) -> None:  # type: ignore[no-untyped-def]
    data = three.to_json()
    assert data["base"] == "base" and set(data["runs"]) == {"kernel", "scaled"}
    for name, run in data["runs"].items():
        assert run["first_divergent_op"] == mlp_truth["runs"][name]["departs_at"]
        assert run["departs_from_reference"] is True
        for op in run["ops"]:
            assert {"aot_ops", "gap_vs_base", "verdict", "scale", "offset", "r2"} <= set(op)
            assert isinstance(op["aot_ops"], list) and op["verdict"] in {a.value for a in Agreement}
    assert data["runs"]["scaled"]["ops"][-1]["scale"] == pytest.approx(0.5, rel=1e-5)


@pytest.mark.parametrize("other", ["culprit_clean_fp32", "mlp_fp32"])
def test_runs_of_another_program_are_refused(other: str) -> None:
    """culprit_clean_fp32 is the same architecture with other weights (its own replay disagrees from
    the first op); mlp_fp32 a smaller MLP (its ops do not line up with the base's)."""
    folder = FIXTURES / other
    with pytest.raises(MismatchedArtifactsError, match=r"(run 'other'|runs 'base' .* and 'other' .*are not runs of one "
                                                       r"program)") as caught:
        compare_runs(MLP / "etrecord.bin", {"base": mlp_run("base"),
                                            "other": (folder / "etdump.etdp", folder / "debug_buffer.bin")})
    assert str(folder / "etdump.etdp") in str(caught.value)


def test_a_run_without_its_debug_buffer_is_named() -> None:
    with pytest.raises(MissingDataError, match=r"run 'phone': ETDump .*logs intermediate tensors but no debug buffer "
                                               r"was given\nPass the buffer .*--run phone=ETDUMP,DEBUG_BUFFER"):
        compare_runs(MLP / "etrecord.bin", {"base": mlp_run("base"), "phone": mlp_run("kernel")[0]})


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"runs": {"a": "x.etdp"}}, r"at least two runs, got 1\nPass e.g."),
    ({"base": "tablet"}, r"base run 'tablet' is not among the runs \('a', 'b'\)\nPass the name"),
    ({"tolerance": -1.0}, r"tolerance must be a number >= 0, got -1.0\nPass e.g."),
    ({"top_k": 0}, r"top_k must be a whole number >= 1, got 0\nPass e.g."),
    ({"distance": "l2", "runs": {"a": "missing.etdp", "b": "missing.etdp"}}, r"Unsupported distance metric 'l2'"),
    ({"runs": {"a": mlp_run("base"), "b": 3}}, r"a run is an ETDump path, .* not 3\nPass e.g."),
])
def test_bad_arguments_are_usage_errors(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"runs": {"a": mlp_run("base"), "b": mlp_run("kernel")}}
    args.update(kwargs)
    with pytest.raises(UsageError, match=message):
        compare_runs(MLP / "etrecord.bin", **args)  # type: ignore[arg-type]


def test_tolerance_decides_within_noise() -> None:
    """The kernel run's linear_1 differs by ~0.31 relative: within a tolerance of 0.5. linear_2 then differs
    by ~0.67, beyond it, but each run's linear_2 is within its own noise of the reference: within noise too."""
    result = compare_runs(MLP / "etrecord.bin", {"base": mlp_run("base"), "kernel": mlp_run("kernel")}, tolerance=0.5)
    ops = {op.aot_ops: op for op in result.runs["kernel"].ops}
    assert ops[("linear_1",)].verdict is Agreement.WITHIN_NOISE and ops[("linear_1",)].note is None
    assert ops[("linear_2",)].verdict is Agreement.WITHIN_NOISE and ops[("linear_2",)].rel_diff > 0.5
    assert "within its own noise" in (ops[("linear_2",)].note or "")
    assert not result.diverges and result.runs["kernel"].departs_from_reference  # its own replay still finds fc2
    assert result.to_json()["tolerance"] == 0.5


def test_relative_difference_edges() -> None:
    assert relative_difference(torch.zeros(3), torch.zeros(3)) == 0.0
    assert relative_difference(torch.zeros(3), torch.ones(3)) == float("inf")
    assert relative_difference(torch.tensor([1, 5], dtype=torch.int8), torch.tensor([2, 3], dtype=torch.int8)) == 2.0


def test_with_only_program_outputs_logged_the_outputs_are_compared() -> None:
    folder = FIXTURES / "program_outputs_only"  # C++ runner at debug level kProgramOutputs
    files = (folder / "etdump.etdp", folder / "debug_buffer.bin")
    result = compare_runs(folder / "etrecord.bin", {"a": files, "b": files})
    run = result.runs["b"]
    assert run.ops == () and run.outputs is not None and run.outputs.source == "program outputs"
    assert run.outputs.fit.kind == "identical" and not result.diverges
    assert any("program outputs compared" in n for n in run.notes)


def test_a_corrupt_etdump_is_named_by_its_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from numdiff.errors import ETDumpError

    bad = tmp_path / "phone.etdp"
    bad.write_bytes((MLP / "kernel" / "etdump.etdp").read_bytes()[:100])
    with pytest.raises(ETDumpError, match="phone.etdp"):
        compare_runs(MLP / "etrecord.bin", {"base": mlp_run("base"), "phone": (bad, mlp_run("kernel")[1])})


def test_an_error_inside_one_runs_replay_names_the_run() -> None:
    """The phone's ETDump with another model's debug buffer: its replay refuses the files, and the
    message starts with the run's name."""
    with pytest.raises(MismatchedArtifactsError, match=r"^run 'phone': "):
        compare_runs(MLP / "etrecord.bin", {"base": mlp_run("base"),
                                            "phone": (mlp_run("kernel")[0], FIXTURES / "culprit_mlp" / "debug_buffer.bin")})
