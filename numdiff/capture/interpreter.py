"""Run a reference graph and capture every op's output, keyed by debug handle.

:class:`IntermediateOutputCapturer` is a ``torch.fx.Interpreter`` that overrides ``run_node`` (the
method torch.fx documents for this), calls the parent, and records the outputs of the nodes
:func:`numdiff.capture.nodes.is_captured_node` selects. :func:`capture_intermediate_outputs` is the
one-call form.

Behaviour decisions, each reproducing the reference's *result* and making its quirks visible:

* **Values** are stored as the reference stores them: a tensor as ``t.detach().clone()``; a tuple
  or list as a *list* whose tensor items are detached clones (other items kept as they are); any
  other value as it is.
* **Shared debug handles**: when several captured nodes carry the same handle (a Linear lowered to
  ``permute_copy`` + ``addmm``), the reference keeps the output of the *last* one in graph order.
  numdiff keeps that one too — and never clones the outputs it would throw away — and reports every
  shared handle in :attr:`CaptureResult.shared_handles` and in :attr:`CaptureResult.notes`.
* **Streaming**: with ``on_output``, each kept output is handed to the callback as soon as its node
  has run — exactly once per handle, for the node whose output the reference keeps (so calls come
  in the order of those nodes, not of the handles' first nodes) — and, unless
  ``keep_outputs=True``, not held afterwards, so graphs whose intermediates would not fit in memory
  at once can still be compared.
* **Grad mode**: the graph runs with grad mode *enabled*, as the reference runs it, because some
  ATen kernels pick another implementation under ``torch.no_grad()`` (``aten.lstm`` on CPU takes
  its oneDNN inference path there and gives slightly different numbers). Unlike the reference,
  every node's output (parameters and placeholders included) is detached as soon as it is
  produced, so no input of any op requires grad and no autograd graph is ever built: the kernel
  choice is the reference's, the memory is that of an inference run.
* **Failures** in a node become :class:`~numdiff.errors.CaptureError` naming the node, its target
  and debug handle, chained to the original exception.

Example:
    >>> import torch
    >>> gm = torch.fx.symbolic_trace(lambda x: torch.relu(x) * 2)
    >>> for h, n in zip([1, 2], [n for n in gm.graph.nodes if n.op == "call_function"]):
    ...     n.meta["debug_handle"] = h
    >>> result = capture_intermediate_outputs(gm, [torch.tensor([-1.0, 3.0])])
    >>> result.outputs
    {(1,): tensor([0., 3.]), (2,): tensor([0., 6.])}
    >>> result.op_names
    {(1,): ['relu'], (2,): ['mul']}
"""

from __future__ import annotations

import operator

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.fx import Interpreter

from numdiff._core.types import DebugHandle
from numdiff.capture.nodes import DEBUG_HANDLE_KEY, aot_debug_handle_to_op_names, handle_key, is_captured_node
from numdiff.capture.threads import graph_threads
from numdiff.errors import CaptureError, NumdiffError

__all__ = ["CaptureResult", "IntermediateOutputCapturer", "OnOutput", "capture_intermediate_outputs", "runs_without_side_effects"]

#: Streaming callback: ``on_output(handle, node, value)``, called once per captured handle.
OnOutput = Callable[[DebugHandle, torch.fx.Node, Any], None]


@dataclass(frozen=True, slots=True)
class CaptureResult:
    """What one run of a reference graph produced.

    Attributes:
        outputs: Captured output by debug handle — the reference's ``aot_intermediate_outputs``,
            in the same order (each handle where its *first* node runs). Empty when streaming
            without ``keep_outputs``.
        op_names: Names of the captured nodes by debug handle, in graph order (all nodes
            sharing a handle are listed) — the reference's ``aot_debug_handle_to_op_names``.
        kept_nodes: Name of the node whose output is kept for each handle (the last in graph order).
        shared_handles: Handles carried by more than one captured node, with all their node names.
            Only the output of ``kept_nodes[handle]`` is kept for these.
        graph_output: What the graph returned (its output structure, e.g. the model's outputs).
        notes: Human-readable remarks on anything the capture decided (shared handles, unset
            handle ``0``), one line each.
    """

    outputs: dict[DebugHandle, Any]
    op_names: dict[DebugHandle, list[str]]
    kept_nodes: dict[DebugHandle, str]
    shared_handles: dict[DebugHandle, tuple[str, ...]]
    graph_output: Any
    notes: tuple[str, ...] = field(default=())

    def __len__(self) -> int:
        """Number of captured debug handles (held or streamed)."""
        return len(self.kept_nodes)


@dataclass(slots=True)
class _Recording:
    """Mutable state of one run: which node keeps each handle, what was captured."""

    keeper: dict[DebugHandle, torch.fx.Node]
    outputs: dict[DebugHandle, Any] = field(default_factory=dict)


class IntermediateOutputCapturer(Interpreter):
    """A ``torch.fx.Interpreter`` that records the output of every captured node by debug handle.

    Every call to :meth:`run` (and so :meth:`run_and_capture` and :meth:`capture`) records afresh;
    the instance is never patched, so a failing run leaves it usable.

    Args:
        module: The reference graph module (e.g. ``ExportedProgram.module()``).
        on_output: Streaming callback ``on_output(handle, node, value)``. Defaults to ``None``.
        keep_outputs: Hold every captured output in memory. Defaults to ``None``: hold them
            unless ``on_output`` is given.
        garbage_collect_values: Passed to ``torch.fx.Interpreter`` (free values after last use).
            Defaults to ``True``.

    Example:
        >>> import torch
        >>> gm = torch.fx.symbolic_trace(lambda x: torch.cos(torch.sin(x)))
        >>> for h, n in zip([5, 5], [n for n in gm.graph.nodes if n.op == "call_function"]):
        ...     n.meta["debug_handle"] = h
        >>> seen = []
        >>> capturer = IntermediateOutputCapturer(gm, on_output=lambda h, n, v: seen.append((h, n.name)))
        >>> result = capturer.capture(torch.zeros(1))
        >>> seen, result.outputs, result.shared_handles
        ([((5,), 'cos')], {}, {(5,): ('sin', 'cos')})
    """

    def __init__(
        self,
        module: torch.fx.GraphModule,
        *,
        on_output: OnOutput | None = None,
        keep_outputs: bool | None = None,
        garbage_collect_values: bool = True,
    ) -> None:
        super().__init__(module, garbage_collect_values=garbage_collect_values)
        # Our CaptureError already names the node; torch's extra traceback would rewrite its message.
        self.extra_traceback = False
        self._on_output = on_output
        self._keep_outputs = on_output is None if keep_outputs is None else keep_outputs
        self._recording: _Recording | None = None
        self._last_result: CaptureResult | None = None
        # Outputs are copied only when a later node could change them in place; the programs
        # torch.export and ExecuTorch write are functional, so usually nothing is copied.
        self._copy_outputs = any(_may_mutate(n) for n in module.graph.nodes if n.op == "call_function")

    def run(self, *args: object, initial_env: dict[torch.fx.Node, object] | None = None,
            enable_io_processing: bool = True) -> object:
        """Run the graph on ``args`` (see ``torch.fx.Interpreter.run``), recording captured outputs."""
        self._recording = _Recording(keeper=self._keepers())
        self._last_result = None
        try:
            # the reference's mode; run_node detaches, so nothing is recorded (enable_grad is untyped in
            # torch 2.9's stubs, typed in 2.13's)
            with torch.enable_grad(), graph_threads():  # type: ignore[no-untyped-call, unused-ignore]
                graph_output = super().run(*args, initial_env=initial_env, enable_io_processing=enable_io_processing)
            self._last_result = self._result(self._recording, graph_output)
        finally:
            self._recording = None
        return graph_output

    def run_node(self, n: torch.fx.Node) -> object:
        """Run one node (via the parent) and record its output when the node is captured."""
        try:
            result = super().run_node(n)
        except NumdiffError:
            raise
        except Exception as e:
            raise CaptureError(
                f"running node {n.name!r} (target {_target_name(n)}, debug handle "
                f"{n.meta.get(DEBUG_HANDLE_KEY)!r}) failed: {type(e).__name__}: {e}{_origin(n)}\n"
                "Check that the inputs match the graph's placeholders (count, shapes, dtypes)."
            ) from e
        result = _without_autograd(result)
        recording = self._recording
        if recording is not None and is_captured_node(n):
            key = handle_key(n.meta[DEBUG_HANDLE_KEY])
            if recording.keeper.get(key) is n:
                self._record(recording, key, n, result)
        return result

    def run_and_capture(self, *args: object, initial_env: dict[torch.fx.Node, object] | None = None,
                        enable_io_processing: bool = True) -> dict[DebugHandle, Any]:
        """Run the graph and return the captured outputs by handle (the reference's method).

        Example:
            >>> import torch
            >>> gm = torch.fx.symbolic_trace(lambda x: torch.neg(x))
            >>> next(n for n in gm.graph.nodes if n.op == "call_function").meta["debug_handle"] = [2, 3]
            >>> IntermediateOutputCapturer(gm).run_and_capture(torch.ones(2))
            {(2, 3): tensor([-1., -1.])}
        """
        return self.capture(*args, initial_env=initial_env, enable_io_processing=enable_io_processing).outputs

    def capture(self, *args: object, initial_env: dict[torch.fx.Node, object] | None = None,
                enable_io_processing: bool = True) -> CaptureResult:
        """Run the graph and return the full :class:`CaptureResult`."""
        self.run(*args, initial_env=initial_env, enable_io_processing=enable_io_processing)
        if self._last_result is None:  # run() either set it or raised
            raise CaptureError("capture finished without a result\nThis is a bug in numdiff: please report it.")
        return self._last_result

    def _keepers(self) -> dict[DebugHandle, torch.fx.Node]:
        # The node whose output the reference ends up with: the last captured node per handle.
        keeper: dict[DebugHandle, torch.fx.Node] = {}
        for node in self.graph.nodes:
            if is_captured_node(node):
                keeper[handle_key(node.meta[DEBUG_HANDLE_KEY])] = node
        return keeper

    def _record(self, recording: _Recording, key: DebugHandle, node: torch.fx.Node, result: object) -> None:
        value = _detached_copy(result) if self._copy_outputs else _detached(result)
        if self._keep_outputs:
            recording.outputs[key] = value
        if self._on_output is None:
            return
        try:
            self._on_output(key, node, value)
        except NumdiffError:
            raise
        except Exception as e:
            raise CaptureError(
                f"on_output callback failed for debug handle {key} at node {node.name!r}: "
                f"{type(e).__name__}: {e}\nFix the callback; the graph itself ran."
            ) from e

    def _result(self, recording: _Recording, graph_output: object) -> CaptureResult:
        op_names = aot_debug_handle_to_op_names(self.module)  # type: ignore[arg-type]
        shared = {h: tuple(names) for h, names in op_names.items() if len(names) > 1}
        # The reference's dict keeps a handle where its *first* node put it, even though the value
        # is the last node's: order the outputs the same way (op_names is in first-node order).
        outputs = {h: recording.outputs[h] for h in op_names if h in recording.outputs}
        return CaptureResult(
            outputs=outputs,
            op_names=op_names,
            kept_nodes={h: n.name for h, n in recording.keeper.items()},
            shared_handles=shared,
            graph_output=graph_output,
            notes=_notes(shared, recording.keeper),
        )


def capture_intermediate_outputs(
    graph_module: torch.fx.GraphModule,
    inputs: Sequence[Any],
    *,
    on_output: OnOutput | None = None,
    keep_outputs: bool | None = None,
) -> CaptureResult:
    """Run ``graph_module`` on ``inputs`` and capture every op's output by debug handle.

    Args:
        graph_module: The reference graph (e.g. ``ExportedProgram.module()``).
        inputs: Positional inputs, passed as ``run(*inputs)``. For a graph from
            ``ExportedProgram.module()`` the inputs are flattened by its pytree codegen, so an
            ETRecord's representative inputs work either as ``[x, y]`` or as ``[(x, y)]``.
        on_output: Streaming callback ``on_output(handle, node, value)``, called once per handle
            right after the node that keeps it has run. Defaults to ``None``.
        keep_outputs: Hold all outputs in :attr:`CaptureResult.outputs`. Defaults to ``None``:
            hold them unless ``on_output`` is given.

    Returns:
        The :class:`CaptureResult`.

    Raises:
        CaptureError: A node (or the callback) failed; the message names the node and its handle.

    Example:
        >>> import torch
        >>> gm = torch.fx.symbolic_trace(lambda x: torch.topk(x, 1))
        >>> next(n for n in gm.graph.nodes if n.op == "call_function").meta["debug_handle"] = 1
        >>> capture_intermediate_outputs(gm, [torch.tensor([1.0, 4.0])]).outputs
        {(1,): [tensor([4.]), tensor([1])]}
    """
    capturer = IntermediateOutputCapturer(graph_module, on_output=on_output, keep_outputs=keep_outputs)
    return capturer.capture(*inputs)


def runs_without_side_effects(graph_module: torch.fx.GraphModule) -> bool:
    """Whether running ``graph_module`` can leave it as it was: only ATen-style calls none of which
    writes into a tensor (no buffer update such as a KV cache's ``copy_``), no submodule or method calls.
    Such a module can be run again (captured, then replayed) with the same results."""
    nodes = graph_module.graph.nodes
    return all(n.op in ("placeholder", "get_attr", "call_function", "output") for n in nodes) and \
        not any(_may_mutate(n) for n in nodes if n.op == "call_function")


def _may_mutate(node: torch.fx.Node) -> bool:
    """Whether a node might write into a tensor (unknown callables count as mutating)."""
    target = node.target
    if target is operator.getitem:
        return False
    schema = getattr(target, "_schema", None)
    return schema is None or bool(schema.is_mutable)


def _without_autograd(value: object) -> object:
    """``value`` with every tensor (also inside a tuple or list) detached, containers kept as they are."""
    if isinstance(value, torch.Tensor):
        return value.detach() if value.requires_grad else value
    if isinstance(value, (tuple, list)) and any(isinstance(v, torch.Tensor) and v.requires_grad for v in value):
        items = [v.detach() if isinstance(v, torch.Tensor) else v for v in value]
        if type(value) in (tuple, list) or type(value).__module__ == "torch.return_types":
            return type(value)(items)
        if hasattr(value, "_fields"):  # a namedtuple
            return type(value)(*items)
    return value


def _detached(value: object) -> object:
    if isinstance(value, torch.Tensor):
        return value.detach()
    if isinstance(value, (tuple, list)):
        return [v.detach() if isinstance(v, torch.Tensor) else v for v in value]
    return value


def _detached_copy(value: object) -> object:
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (tuple, list)):
        return [v.detach().clone() if isinstance(v, torch.Tensor) else v for v in value]
    return value


def _notes(shared: dict[DebugHandle, tuple[str, ...]], keeper: dict[DebugHandle, torch.fx.Node]) -> tuple[str, ...]:
    notes: list[str] = []
    if shared:
        notes.append(
            f"{len(shared)} debug handle(s) are shared by several nodes; for each, the output of the "
            "last node is kept (as the reference does): "
            + "; ".join(f"{h}: {', '.join(names)} -> kept {keeper[h].name}" for h, names in shared.items())
        )
    unset = (0,)
    if unset in keeper:
        notes.append(
            "nodes with the unset debug handle 0 (no Edge node descends from them) are captured under (0,)"
        )
    return tuple(notes)


def _target_name(node: torch.fx.Node) -> str:
    target = node.target
    if isinstance(target, str) or isinstance(target, torch._ops.OpOverload):
        return str(target)
    return str(getattr(target, "__name__", target))


def _origin(node: torch.fx.Node) -> str:
    trace = node.meta.get("stack_trace")
    if not trace:
        return ""
    lines = [line.strip() for line in str(trace).strip().splitlines() if line.strip()]
    return f" (model code: {' '.join(lines[-2:])})"
