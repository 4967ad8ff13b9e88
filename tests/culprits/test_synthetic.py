"""find_culprits on hand-made runtime values: replay semantics, non-finite first, noise models."""

from __future__ import annotations

import importlib
import math
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from numdiff.comparators import get_comparator
from numdiff.culprits import Thresholds, Verdict, find_culprits
from numdiff.culprits._noise import Noise, reduction_length, resolve_thresholds
from numdiff.culprits._lineage import lineage
from numdiff.culprits._replay import ReplayInterpreter, quant_noise


class _Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc(x)) * 2.0


def _setup() -> tuple[Any, torch.Tensor, dict[str, torch.Tensor]]:
    torch.manual_seed(0)
    model = _Tiny().eval()
    x = torch.randn(2, 4)
    ep = torch.export.export(model, (x,))
    calls = [n for n in ep.graph.nodes if n.op == "call_function"]
    for handle, node in enumerate(calls, start=1):
        node.meta["debug_handle"] = handle
    etrecord = SimpleNamespace(exported_program=None, export_graph_id=None, edge_dialect_program=ep,
                               graph_map={}, _representative_inputs=[(x,)])
    with torch.no_grad():
        lin = model.fc(x)
        outs = {"linear": lin, "relu": torch.relu(lin), "mul": torch.relu(lin) * 2.0}
    return etrecord, x, outs


def _event(name: str, handle: int, data: Any) -> SimpleNamespace:
    return SimpleNamespace(name=name, op_types=[name], debug_handles=handle, _instruction_id=handle,
                           debug_data=[data], num_outputs=1, is_delegated_op=False, delegate_backend_name=None,
                           perf_data=None)


def _run(runtime: dict[str, torch.Tensor], **kwargs: Any) -> Any:
    etrecord, _, _ = _setup()
    events = [_event(f"native_call_{name}", h, runtime[name]) for h, name in enumerate(("linear", "relu", "mul"), 1)]
    # The hand-made runtime values are computed from the representative input.
    kwargs.setdefault("inputs_are_representative", True)
    return find_culprits(etrecord, events, get_comparator("SNR"), reference_graph="edge_dialect_exported_program",
                         **kwargs)


def test_an_op_that_only_inherits_is_not_blamed() -> None:
    _, _, aot = _setup()
    wrong_linear = aot["linear"] + 0.5
    runtime = {"linear": wrong_linear, "relu": torch.relu(wrong_linear), "mul": torch.relu(wrong_linear) * 2.0}
    rep = _run(runtime)
    assert [r.is_culprit for r in rep.rows] == [True, False, False]
    assert [r.verdict for r in rep.rows][1:] == [Verdict.OK, Verdict.OK]
    assert rep.rows[1].local_gap == math.inf and rep.rows[2].accumulated_gap < 30


def test_the_first_non_finite_output_is_reported_and_blamed() -> None:
    _, _, aot = _setup()
    relu = aot["relu"].clone()
    relu[0, 0] = float("nan")
    rep = _run({"linear": aot["linear"], "relu": relu, "mul": relu * 2.0})
    first = rep.first_nonfinite
    assert first is not None and first.row == 1 and first.count == 1 and not first.inputs_nonfinite
    assert "first non-finite runtime output: row 1 (relu)" in str(rep)
    assert rep.rows[1].verdict is Verdict.BROKEN and rep.rows[1].is_culprit
    mul = rep.rows[2]  # NaN inherited: the replay on the runtime's inputs has it too
    assert not mul.is_culprit and mul.nonfinite == 1 and "1 NaN/Inf in the runtime output, 1 in the replay" in mul.note
    assert rep.model_nonfinite is None  # the NaN the device made, inherited: not the model's own


def test_nan_the_model_computes_is_no_device_fault() -> None:
    """A NaN in the graph input: every op computes NaN at the same place, and the replay on the same
    inputs does too. Reported as the model's own; the headline raises no alarm."""
    etrecord, x, _ = _setup()
    x[0, 0] = float("nan")  # the representative input the ETRecord holds
    torch.manual_seed(0)
    model = _Tiny().eval()  # the weights _setup made (same seed)
    with torch.no_grad():
        lin = model.fc(x)
    runtime = {"linear": lin, "relu": torch.relu(lin), "mul": torch.relu(lin) * 2.0}
    events = [_event(f"native_call_{name}", h, runtime[name]) for h, name in enumerate(("linear", "relu", "mul"), 1)]
    rep = find_culprits(etrecord, events, get_comparator("SNR"), reference_graph="edge_dialect_exported_program",
                        inputs_are_representative=True)
    assert rep.first_nonfinite is None and not rep.culprits
    own = rep.model_nonfinite
    assert own is not None and (own.row, own.node, own.count) == (0, "linear", int(lin.isnan().sum()))
    assert str(rep).splitlines()[0].endswith("NaN/Inf from row 0 (linear) as the model computes them")
    assert own.as_the_model_computes() in str(rep)


def test_replay_interpreter_substitutes_runtime_values_of_paired_producers() -> None:
    gm = torch.fx.symbolic_trace(lambda x: torch.neg(torch.exp(x) + 1))
    seen: dict[str, torch.Tensor] = {}

    def on_paired(node: torch.fx.Node, replay: Any, args: Any, kwargs: Any, noise: Noise) -> Any:
        seen[node.name] = replay
        return torch.full_like(replay, 10.0) if node.name == "exp" else replay

    paired = {"exp", "neg"}
    ReplayInterpreter(gm, paired, on_paired).run(torch.zeros(2))
    assert torch.equal(seen["neg"], torch.full((2,), -11.0))  # add (unlogged) replayed on exp's runtime value
    lin = lineage(gm.graph, paired)
    assert lin["neg"].producers == (("exp", None),) and lin["neg"].replayed == ("add",)
    assert lin["exp"].graph_inputs == ("x",)


def test_reduction_lengths() -> None:
    x, w = torch.zeros(2, 16), torch.zeros(4, 16)
    assert reduction_length(torch.ops.aten.linear.default, (x, w), {}, None) == 16
    conv_w = torch.zeros(8, 3, 3, 3)
    assert reduction_length(torch.ops.aten.conv2d.default, (torch.zeros(1, 3, 8, 8), conv_w), {}, None) == 27
    assert reduction_length(torch.ops.aten._softmax.default, (torch.zeros(2, 5), -1, False), {}, None) == 5
    assert reduction_length(torch.ops.aten.mean.dim, (torch.zeros(2, 6, 4),), {}, torch.zeros(2)) == 24
    assert reduction_length(torch.ops.aten.relu.default, (x,), {}, x) == 1


def test_noise_sigma_float_quantized_and_per_channel() -> None:
    ref = torch.tensor([[1.0, -2.0], [0.5, 0.25]], dtype=torch.float64)
    float_sigma = float(Noise(reduction=16).sigma(ref, torch.float32))
    assert float_sigma == pytest.approx(2.0**-23 * 4 * 2.0)
    assert float(Noise(quant_step=0.1).sigma(ref, torch.float32)) == pytest.approx(0.1 / math.sqrt(12), rel=1e-6)
    assert float(Noise().sigma(ref, torch.int8)) == pytest.approx(1 / math.sqrt(12))
    per_channel = Noise(quant_step=torch.tensor([0.1, 1.0]), quant_axis=1).sigma(ref, torch.float32)
    assert per_channel.shape == (1, 2) and float(per_channel[0, 1]) == pytest.approx(1 / math.sqrt(12), rel=1e-6)
    importlib.import_module("torch.ao.quantization.fx._decomposed")  # registers quantized_decomposed ops
    dequantize = torch.ops.quantized_decomposed.dequantize_per_channel.default
    step, axis, zero = quant_noise(dequantize, (torch.zeros(2, 2), torch.tensor([0.1, 1.0]), torch.zeros(2), 1,
                                                -128, 127, torch.int8), {})
    assert zero is None
    per_tensor = quant_noise(torch.ops.quantized_decomposed.dequantize_per_tensor.default,
                             (torch.zeros(2), 0.25, 3, -128, 127, torch.int8), {})
    assert per_tensor == (0.25, None, 3.0)
    assert axis == 1 and isinstance(step, torch.Tensor)


def test_thresholds_and_verdicts() -> None:
    limits = Thresholds(ok=1, expected=10, broken=100)
    assert [limits.verdict(u).value for u in (0, 5, 50, 500, math.nan)] == \
        ["ok", "expected-noise", "suspicious", "broken", "unmatched"]
    resolved = resolve_thresholds({"default": {"expected": 32}, "softmax": {"broken": 9000}})
    assert resolved["default"].expected == 32 and resolved["softmax"].expected == 32
    assert resolved["softmax"].broken == 9000 and resolved["quantized"].expected == pytest.approx(math.sqrt(12))


def test_a_runtime_value_of_another_size_is_unmatched_and_not_substituted() -> None:
    _, _, aot = _setup()
    rep = _run({"linear": aot["linear"], "relu": torch.zeros(5), "mul": aot["mul"]})
    relu, mul = rep.rows[1], rep.rows[2]
    assert relu.verdict is Verdict.UNMATCHED and not relu.is_culprit
    assert "runtime shape (5,) vs AOT (2, 3): not substituted" in (relu.note or "")
    assert mul.input_source == "aot" and "producers relu not substituted" in (mul.note or "")
    assert mul.verdict is Verdict.OK  # replayed on the AOT-side value of relu, which the runtime agrees with
    status = {m.name: m.status for m in rep.matching if m.side == "aot"}
    assert status == {"linear": "matched", "relu": "matched", "mul": "matched"}


def test_a_runtime_value_in_another_dtype_is_cast_for_the_replay() -> None:
    _, _, aot = _setup()
    rep = _run({"linear": aot["linear"].double(), "relu": aot["relu"], "mul": aot["mul"]})
    assert rep.rows[0].transform == "cast torch.float64->torch.float32"
    assert rep.culprits == []


def test_no_culprit_is_named_behind_a_producer_that_could_not_be_compared() -> None:
    _, _, aot = _setup()
    rep = _run({"linear": aot["linear"], "relu": torch.zeros(5), "mul": aot["mul"] + 3.0})
    mul = rep.rows[2]
    assert mul.verdict is Verdict.BROKEN and not mul.is_culprit
    assert "producer(s) relu could not be compared" in (mul.note or "")


def test_an_integer_runtime_value_is_dequantized_with_the_graphs_parameters() -> None:
    from numdiff.culprits._measure import as_runtime_layout

    like = torch.zeros(2, 2)
    value, how = as_runtime_layout(torch.tensor([[10, -3], [0, 5]], dtype=torch.int8), like,
                                   Noise(quant_step=0.5, zero_point=1.0))
    assert how == "dequantize(scale 0.5, zero point 1)"
    assert torch.equal(value, torch.tensor([[4.5, -2.0], [-0.5, 2.0]]))
    assert as_runtime_layout(torch.zeros(2, 2, dtype=torch.int8), like)[1] == \
        "runtime dtype torch.int8 vs AOT torch.float32: not substituted"
    nhwc, how = as_runtime_layout(torch.arange(24.0).reshape(1, 2, 3, 4), torch.zeros(1, 4, 2, 3))
    assert how == "NHWC->NCHW" and float(nhwc[0, 1, 0, 0]) == 1.0


def test_a_dequantize_that_rounds_nothing_is_judged_by_floating_point_noise() -> None:
    """Rounding onto the grid happens in a quantize op. A dequantize of values already on the grid (a
    constant's, or its paired producer's runtime integers) is exact up to float rounding, so a step of
    error there is a real difference (found by the zoo: a changed int8 weight hid as 'expected-noise')."""
    importlib.import_module("torch.ao.quantization.fx._decomposed")
    qd = torch.ops.quantized_decomposed
    ref = torch.tensor([1.0, -2.0], dtype=torch.float64)
    assert float(Noise(quant_step=0.1, rounding=False).sigma(ref, torch.float32)) == pytest.approx(2.0**-23 * 2.0)
    assert not Noise(quant_step=0.1, rounding=False).quantized(torch.float32)
    assert "floating-point noise only" in Noise(quant_step=0.1, rounding=False).describe()

    def model(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        wq = qd.dequantize_per_tensor.default(w, 0.1, 0, -127, 127, torch.int8)
        xq = qd.quantize_per_tensor.default(x, 0.1, 0, -127, 127, torch.int8)
        return wq, qd.dequantize_per_tensor.default(xq, 0.1, 0, -127, 127, torch.int8)

    gm = torch.fx.symbolic_trace(model)
    names = [n.name for n in gm.graph.nodes if n.op == "call_function"]
    seen: dict[str, Noise] = {}

    def on_paired(node: torch.fx.Node, replay: Any, args: Any, kwargs: Any, noise: Noise) -> Any:
        seen[node.name] = noise
        return replay

    ReplayInterpreter(gm, {names[0], names[2]}, on_paired).run(torch.ones(3), torch.ones(3, dtype=torch.int8))
    assert seen[names[0]].rounding is False  # dequantize of a grid value: nothing rounded
    assert seen[names[2]].rounding is True  # the unlogged quantize before it rounds


def test_each_runtime_value_of_one_node_is_judged_against_its_replay() -> None:
    """A delegate may return one node's value twice (int8 for the next delegate, dequantized for a
    portable op: the held-out Conformer block on int8 XNNPACK). Each pair is judged against the node's
    replay. Before, the second was compared with what the first substituted: a 'perfect' agreement that
    confirmed a graph input the run had not used (a false culprit on a run with 1% input noise)."""
    from numdiff.align import AlignedPair, MatchKind
    from numdiff.culprits._scorer import Meter, Planned, Scorer

    gm = torch.fx.symbolic_trace(lambda x: torch.relu(x) * 2.0)
    relu = next(n for n in gm.graph.nodes if n.op == "call_function")
    x = torch.linspace(-1.0, 1.0, 16)
    good, off = torch.relu(x), torch.relu(x) + 0.1
    pairs = [Planned(AlignedPair((2,), good, (1, 2, 2), value, MatchKind.POSITION, index), None)
             for index, value in enumerate((off, good.clone()))]
    meter = Meter(get_comparator("SNR"), {(2,): [relu.name]}, {(1, 2, 2): ["DELEGATE_CALL"]})
    scorer = Scorer(meter, resolve_thresholds(None), lineage(gm.graph, {relu.name}), {}, {}, {},
                    {relu.name: pairs}, None, unreliable={}, supplied=frozenset(), inputs_from_runtime={})
    ReplayInterpreter(gm, {relu.name}, scorer.on_paired).run(x)
    first, second = scorer.rows
    assert first.verdict.beyond_noise and first.local_gap < 30
    assert second.verdict is Verdict.OK and second.local_gap == math.inf


def test_nodes_that_compute_the_same_share_the_runtime_value() -> None:
    """PT2E writes one dequantize per consumer of a quantized value, all under the quantize's debug handle;
    the runtime's value is kept for the last. A consumer of the first (held-out ShuffleNet on int8 XNNPACK:
    a portable avg_pool2d reading a delegate's dequantized output) replayed it from the graph input through
    the delegate's int8 convolution, and was named a culprit at 70 dB on clean runs. The first such node is
    paired now, and the others read what it substituted."""
    from numdiff.culprits._same_values import same_values

    importlib.import_module("torch.ao.quantization.fx._decomposed")
    qd = torch.ops.quantized_decomposed

    def model(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        q = qd.quantize_per_tensor.default(x, 0.1, 0, -127, 127, torch.int8)
        first = qd.dequantize_per_tensor.default(q, 0.1, 0, -127, 127, torch.int8)
        last = qd.dequantize_per_tensor.default(q, 0.1, 0, -127, 127, torch.int8)
        return torch.relu(first), last * 2.0

    gm = torch.fx.symbolic_trace(model)
    q, first, last, relu, mul = [n for n in gm.graph.nodes if n.op == "call_function"]
    handles = {q.name: (1,), first.name: (1,), last.name: (1,), relu.name: (2,), mul.name: (3,)}
    keepers, shared = same_values(gm.graph, {(1,): last.name, (2,): relu.name, (3,): mul.name},
                                  lambda n: handles.get(n.name))
    assert keepers == {(1,): first.name, (2,): relu.name, (3,): mul.name} and shared == {last.name: first.name}
    assert lineage(gm.graph, set(keepers.values()), shared)[mul.name].producers == ((first.name, None),)
    # what the runtime logged: a step off the replay (the replay never sees it but through the substitution)
    x = torch.linspace(-1.0, 1.0, 8)
    logged = qd.dequantize_per_tensor.default(qd.quantize_per_tensor.default(x, 0.1, 0, -127, 127, torch.int8),
                                              0.1, 0, -127, 127, torch.int8) + 0.1
    read: dict[str, Any] = {}

    def on_paired(node: torch.fx.Node, replay: Any, args: Any, kwargs: Any, noise: Noise) -> Any:
        read[node.name] = args[0]
        return logged if node.name == first.name else replay

    ReplayInterpreter(gm, set(keepers.values()), on_paired, shared=shared).run(x)
    assert read[relu.name] is logged and read[mul.name] is logged
    # a node of another handle computing the same keeps its own value (it has its own row)
    _, apart = same_values(gm.graph, {(1,): last.name}, lambda n: (1,) if n is first else (4,) if n is last else None)
    assert apart == {}
