"""A float64 value computed from float32 inputs is judged on float32's epsilon (held-out 2: a portable
``choose_qparams``'s scale one float32 ulp from PyTorch's was "broken" at 2.5e8 noise units)."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
import torch

from numdiff.culprits._noise import Noise
from numdiff.culprits._replay import ReplayInterpreter

importlib.import_module("torch.ao.quantization.fx._decomposed")  # registers quantized_decomposed ops


def test_a_float64_value_from_float32_inputs_has_float32_noise() -> None:
    ref = torch.tensor([0.02], dtype=torch.float64)
    assert float(Noise().sigma(ref, torch.float64)) == pytest.approx(2.0**-52 * 0.02)
    assert float(Noise(input_dtype=torch.float32).sigma(ref, torch.float64)) == pytest.approx(2.0**-23 * 0.02)
    # a narrower output keeps its own (larger) epsilon
    assert float(Noise(input_dtype=torch.float64).sigma(ref, torch.float32)) == pytest.approx(2.0**-23 * 0.02)


def test_an_op_mixing_precisions_is_judged_on_the_wider_one() -> None:
    # mul(float16, float32) computes in float32: a float16 epsilon (8192x larger) would hide a fault
    gm = torch.fx.symbolic_trace(lambda a, b: torch.mul(a, b))
    seen: dict[str, Noise] = {}

    def on_paired(node: torch.fx.Node, replay: Any, args: Any, kwargs: Any, noise: Noise) -> Any:
        seen[node.name] = noise
        return replay

    ReplayInterpreter(gm, {"mul"}, on_paired).run(torch.ones(3, dtype=torch.float16), torch.ones(3))
    assert seen["mul"].input_dtype == torch.float32


def test_the_replay_gives_choose_qparams_scale_its_input_precision() -> None:
    choose = torch.ops.quantized_decomposed.choose_qparams.tensor
    gm = torch.fx.symbolic_trace(lambda x: choose(x, -128, 127, 2.0**-12, torch.int8))
    seen: dict[str, Noise] = {}

    def on_paired(node: torch.fx.Node, replay: Any, args: Any, kwargs: Any, noise: Noise) -> Any:
        seen[node.name] = noise
        return replay

    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(0))
    ReplayInterpreter(gm, {"choose_qparams_tensor"}, on_paired).run(x)
    (noise,) = seen.values()
    assert noise.input_dtype == torch.float32
    scale = choose(x, -128, 127, 2.0**-12, torch.int8)[0]
    assert scale.dtype == torch.float64
    off_by_an_ulp = scale.float().nextafter(torch.tensor(1.0)).double()  # a kernel computing it in float32
    units = float((off_by_an_ulp - scale).abs() / noise.sigma(scale, torch.float64))
    assert units < 1.0
