"""The rounding check (numdiff/culprits/_rounding.py): a step of difference is honest only next to a tie."""

from __future__ import annotations

import importlib
import math
from typing import Any

import pytest
import torch

from numdiff.culprits._noise import Noise
from numdiff.culprits._replay import ReplayInterpreter
from numdiff.culprits._rounding import TieMargin, judged_off, off_tie, tie_margin

SCALE = 0.05


def _rounded(values: torch.Tensor, scale: float = SCALE) -> torch.Tensor:
    return torch.round(values / scale) * scale


def test_tie_margin_is_the_distance_to_the_nearest_half_step() -> None:
    tie = tie_margin(torch.tensor([0.0, 0.025, 0.0125, -0.06]), SCALE, reduction=4)
    assert tie is not None
    assert tie.margin.tolist() == pytest.approx([0.5, 0.0, 0.25, 0.3], abs=1e-6)
    # sigma: eps * sqrt(K) * the largest value in steps (1.2 steps)
    assert tie.sigma == pytest.approx(torch.finfo(torch.float32).eps * 2 * 1.2)
    assert tie.tolerance(64) == pytest.approx(1e-3)  # the floor: float32's error is far smaller here
    assert tie_margin(torch.ones(3, dtype=torch.int8), SCALE, 1) is None  # not a float
    assert tie_margin(torch.ones(3), torch.tensor([0.1, 0.2, 0.3]), 1) is None  # per-channel scale
    assert tie_margin(torch.ones(3), 0.0, 1) is None and tie_margin(torch.ones(3), math.nan, 1) is None


def test_an_honest_kernel_moves_only_values_next_to_a_tie() -> None:
    torch.manual_seed(0)
    values = torch.randn(20_000) * 3
    tie = tie_margin(values, SCALE, reduction=64)
    assert tie is not None
    replay = _rounded(values)
    # another kernel: another accumulation's float error (here 1e-5 relative, within the allowance)
    other = _rounded(values * (1 + 1e-5 * torch.randn(20_000).clamp(-2, 2)))
    assert int((other != replay).sum()) > 0  # some values did move ...
    found = off_tie(replay, other, SCALE, None, tie, tie.tolerance(64))
    assert found is not None and found[:2] == (0, 20_000)  # ... every one next to a tie


def test_a_one_percent_scale_change_moves_values_far_from_any_tie() -> None:
    torch.manual_seed(1)
    values = torch.randn(4000) * 3
    tie = tie_margin(values, SCALE, reduction=1)
    assert tie is not None
    replay, wrong = _rounded(values), _rounded(values / 1.01)
    count, elements, closest = off_tie(replay, wrong, SCALE, None, tie, tie.tolerance(64)) or (0, 0, 0.0)
    assert elements == 4000 and count > 400 and closest > 1e-3
    assert judged_off(count, elements)
    # in noise units this is within the quantized allowance of sqrt(12): the check is what sees it
    units = float(((wrong - replay) / (SCALE / math.sqrt(12))).pow(2).mean().sqrt())
    assert 0.5 < units < math.sqrt(12)


def test_two_steps_are_never_rounding_and_a_few_elements_are_not_enough() -> None:
    values = torch.full((2000,), 0.025)  # every value exactly on a tie: one step either way is honest
    tie = tie_margin(values, SCALE, 1)
    assert tie is not None
    replay = _rounded(values)
    one_step, two_steps = replay.clone(), replay.clone()
    one_step[:100] += SCALE
    two_steps[:2] += 2 * SCALE
    assert off_tie(replay, one_step, SCALE, None, tie, 1e-3)[:2] == (0, 2000)  # type: ignore[index]
    assert off_tie(replay, two_steps, SCALE, None, tie, 1e-3)[:2] == (2, 2000)  # type: ignore[index]
    assert not judged_off(2, 2000) and judged_off(3, 2000) and not judged_off(3, 10_000) and judged_off(10, 10_000)


def test_integer_and_per_channel_grids_and_what_cannot_be_compared() -> None:
    values = torch.tensor([[0.2, 1.2], [3.3, -4.0]])
    tie = TieMargin(torch.full((2, 2), 0.3), 0.0)
    ints = torch.tensor([[0, 1], [3, -4]], dtype=torch.int8)
    assert off_tie(ints, ints + torch.tensor([[1, 0], [0, 0]], dtype=torch.int8), None, None, tie, 1e-3) == (1, 4, pytest.approx(0.3))
    steps = torch.tensor([0.1, 1.0])
    runtime = values + torch.tensor([[0.1, 0.0], [0.0, 0.0]])  # one step of channel 0 (step 0.1)
    assert off_tie(values, runtime, steps, 1, tie, 1e-3) == (1, 4, pytest.approx(0.3))
    runtime = values + torch.tensor([[0.0, 0.1], [0.0, 0.0]])  # a tenth of channel 1's step: not off
    assert off_tie(values, runtime, steps, 1, tie, 1e-3)[0] == 0  # type: ignore[index]
    assert off_tie(values, values.reshape(4), 0.1, None, tie, 1e-3) is None  # shapes differ
    assert off_tie(values, values, torch.tensor([0.1, 0.2, 0.3]), 0, tie, 1e-3) is None  # steps fit no axis


def _q_graph() -> Any:
    importlib.import_module("torch.ao.quantization.fx._decomposed")
    qd = torch.ops.quantized_decomposed

    def model(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        once = qd.dequantize_per_tensor.default(qd.quantize_per_tensor.default(x * 2, SCALE, 0, -127, 127, torch.int8),
                                                SCALE, 0, -127, 127, torch.int8)
        twice = qd.dequantize_per_tensor.default(qd.quantize_per_tensor.default(once + w, SCALE, 0, -127, 127, torch.int8),
                                                 SCALE, 0, -127, 127, torch.int8)
        return once, twice

    return torch.fx.symbolic_trace(model)


def test_the_replay_gives_a_tie_margin_only_to_a_row_ending_its_one_rounding() -> None:
    """``once`` rounds once from the run's values; ``twice`` (unpaired ``once``) rounds twice: the first
    rounding's honest flips move the second's values anywhere, so it gets no tie margin."""
    gm = _q_graph()
    deq = [n.name for n in gm.graph.nodes if "dequantize" in str(n.target)]
    seen: dict[str, Noise] = {}

    def on_paired(node: torch.fx.Node, replay: Any, args: Any, kwargs: Any, noise: Noise) -> Any:
        seen[node.name] = noise
        return replay

    ReplayInterpreter(gm, {deq[0], deq[1]}, on_paired).run(torch.randn(8), torch.randn(8))
    assert seen[deq[0]].tie is not None and seen[deq[1]].tie is not None  # once paired: each rounds once
    seen.clear()
    ReplayInterpreter(gm, {deq[1]}, on_paired).run(torch.randn(8), torch.randn(8))
    assert seen[deq[1]].tie is None  # two roundings of run values since the last paired value


def test_carried_rounding_noise_through_linear_add_mul_and_the_rest() -> None:
    from numdiff.culprits._rounding import carried, dynamic_rounding

    w = torch.tensor([[3.0, 4.0], [1.0, 0.0]])  # row norms 5 and 1
    x = torch.ones(2, 2)
    assert carried("linear", (x, w), (0.1, 0.0)) == pytest.approx(0.5)
    conv_w = torch.zeros(2, 1, 2, 2)
    conv_w[1] = 1.0  # out-channel norms 0 and 2
    assert carried("conv2d", (torch.ones(1, 1, 3, 3), conv_w), (0.1, 0.0)) == pytest.approx(0.2)
    assert carried("add", (x, x), (0.3, 0.4)) == pytest.approx(0.5)
    assert carried("mul", (x, 2 * x), (0.1, 0.0)) == pytest.approx(0.2)
    assert carried("bmm", (torch.ones(1, 2, 2), torch.ones(1, 2, 3)), (0.1, 0.0)) == pytest.approx(0.1 * math.sqrt(2))
    assert carried("relu", (x,), (0.25,)) == 0.25 and carried("linear", (x, w), (0.0, 0.0)) == 0.0
    assert dynamic_rounding(0.0, torch.tensor([0.06])) == pytest.approx(0.06 / math.sqrt(6))
    assert dynamic_rounding(0.3, 0.0) == pytest.approx(0.3)


def test_only_a_grid_computed_at_run_time_carries_rounding_noise_into_the_row() -> None:
    """Dynamic quantization (choose_qparams → quantize → dequantize → linear): the runtime computes the
    grid its own way, so the row's noise includes the rounding carried through the linear. A static
    grid (a literal scale) is the same on both sides: nothing carried."""
    importlib.import_module("torch.ao.quantization.fx._decomposed")
    qd = torch.ops.quantized_decomposed
    w = torch.tensor([[3.0, 4.0], [0.0, 1.0]])

    def dynamic(x: torch.Tensor) -> torch.Tensor:
        scale, zero = qd.choose_qparams.tensor(x, -128, 127, 1e-7, torch.int8)
        q = qd.quantize_per_tensor.tensor(x, scale, zero, -128, 127, torch.int8)
        return torch.nn.functional.linear(qd.dequantize_per_tensor.tensor(q, scale, zero, -128, 127, torch.int8), w)

    def static(x: torch.Tensor) -> torch.Tensor:
        q = qd.quantize_per_tensor.default(x, 0.05, 0, -128, 127, torch.int8)
        return torch.nn.functional.linear(qd.dequantize_per_tensor.default(q, 0.05, 0, -128, 127, torch.int8), w)

    x = torch.tensor([[1.0, -2.0]])
    for model, expected in ((dynamic, None), (static, 0.0)):
        gm = torch.fx.symbolic_trace(model)
        last = [n.name for n in gm.graph.nodes if n.op == "call_function"][-1]
        seen: dict[str, Noise] = {}

        def on_paired(node: torch.fx.Node, replay: Any, args: Any, kwargs: Any, noise: Noise) -> Any:
            seen[node.name] = noise
            return replay

        ReplayInterpreter(gm, {last}, on_paired).run(x)
        noise = seen[last]
        if expected is None:
            step = float(qd.choose_qparams.tensor(x, -128, 127, 1e-7, torch.int8)[0])
            assert noise.carried == pytest.approx(step / math.sqrt(6) * 5)  # largest row norm of w: 5
            assert noise.quantized(torch.float32) and "dynamic quantization's rounding" in noise.describe()
        else:
            assert noise.carried == expected and not noise.quantized(torch.float32)
