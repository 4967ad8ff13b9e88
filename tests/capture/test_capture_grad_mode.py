"""Capture runs ops in the reference's grad mode (enabled) without building an autograd graph.

The reference captures without ``torch.no_grad()``; ``aten.lstm`` on CPU takes another kernel
path under no_grad, so a capture under no_grad would differ from the reference's numbers.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from numdiff.capture.interpreter import capture_intermediate_outputs


class _LSTMNet(torch.nn.Module):
    """A 2-layer LSTM then a Linear, written with ``aten.lstm`` as torch.export leaves it in ATen graphs."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = torch.nn.LSTM(16, 32, num_layers=2, batch_first=True)
        self.fc = torch.nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.zeros(2, x.shape[0], 32)
        params = [getattr(self.lstm, f"{kind}_l{layer}") for layer in (0, 1)
                  for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
        y = torch.ops.aten.lstm.input(x, [h, h], params, True, 2, 0.0, False, False, True)
        return self.fc(y[0])  # type: ignore[no-any-return]


class _Plain(torch.fx.Interpreter):
    """What the reference does: run every node as it is, in the ambient grad mode, and keep outputs."""

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        super().__init__(gm)
        self.seen: dict[str, Any] = {}

    def run_node(self, n: torch.fx.Node) -> Any:
        out = super().run_node(n)
        self.seen[n.name] = out
        return out


@pytest.fixture(scope="module")
def lstm_graph() -> tuple[torch.fx.GraphModule, torch.Tensor]:
    torch.manual_seed(0)
    x = torch.randn(2, 7, 16)
    gm = torch.fx.symbolic_trace(_LSTMNet().eval(), concrete_args=None)
    assert any(n.op == "get_attr" for n in gm.graph.nodes)  # parameters reach aten.lstm as graph attributes
    for handle, node in enumerate((n for n in gm.graph.nodes if n.op in ("call_function", "call_module")), start=1):
        node.meta["debug_handle"] = handle
    return gm, x


def _lstm_node(gm: torch.fx.GraphModule) -> torch.fx.Node:
    return next(n for n in gm.graph.nodes if n.op == "call_function" and n.target is torch.ops.aten.lstm.input)


def _plain_run(gm: torch.fx.GraphModule, x: torch.Tensor, grad: bool) -> dict[str, Any]:
    interp = _Plain(gm)
    with torch.set_grad_enabled(grad):
        interp.run(x)
    return interp.seen


def test_aten_lstm_capture_equals_a_grad_enabled_run_exactly(lstm_graph: tuple[torch.fx.GraphModule, torch.Tensor]) -> None:
    gm, x = lstm_graph
    node = _lstm_node(gm)
    with torch.no_grad():  # the caller's mode must not matter
        captured = capture_intermediate_outputs(gm, [x]).outputs[(node.meta["debug_handle"],)]
    reference = _plain_run(gm, x, grad=True)[node.name]
    assert isinstance(captured, list) and len(captured) == 3
    for got, want in zip(captured, reference, strict=True):
        assert torch.equal(got, want.detach())
    # The test means something: under no_grad the kernel gives other numbers.
    no_grad = _plain_run(gm, x, grad=False)[node.name]
    assert not torch.equal(captured[0], no_grad[0])
    graph_output = _plain_run(gm, x, grad=True)["output"]
    assert torch.equal(capture_intermediate_outputs(gm, [x]).graph_output, graph_output.detach())


def test_no_autograd_graph_is_built_and_parameters_are_untouched(
    lstm_graph: tuple[torch.fx.GraphModule, torch.Tensor],
) -> None:
    gm, x = lstm_graph
    result = capture_intermediate_outputs(gm, [x])
    values = [v for out in result.outputs.values() for v in (out if isinstance(out, list) else [out])]
    tensors = [v for v in values if isinstance(v, torch.Tensor)] + [result.graph_output]
    assert tensors
    assert all(t.grad_fn is None and not t.requires_grad for t in tensors)
    assert all(p.requires_grad for p in gm.parameters())  # the user's module is not modified
    assert all(p.grad is None for p in gm.parameters())
