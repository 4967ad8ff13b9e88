"""Stand-ins for graph nodes torch alone cannot run: delegate calls and unknown operators.

* :class:`LoweredModule` holds what ExecuTorch serialized for a lowered (delegated) partition:
  backend id, compiled bytes, compile specs, the scratch buffers the backend asked for
  (:class:`ScratchSpec`, export schema 5.5, pytorch/executorch#21985) and — when present — the
  partition's original program. Calling it runs that original program, so a graph with delegates
  stays runnable on the host.
* :class:`DelegateCall` is the call-function target of a delegate node (shown as
  ``executorch_call_delegate``, as in the reference).
* :class:`UnrunnableOp` stands in for an operator this process cannot resolve. It keeps the graph
  loadable and inspectable; calling it raises :class:`~numdiff.errors.CaptureError`.
* :data:`PLACEHOLDER_HOP` only exists while torch's deserializer reads such nodes (it reads a
  higher-order operator's inputs without needing a schema); it never stays in a loaded graph.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeGuard

import torch
from torch._ops import HigherOrderOperator

from numdiff.errors import CaptureError

__all__ = [
    "DELEGATE_OP_TYPE",
    "PLACEHOLDER_HOP",
    "PLACEHOLDER_TARGET",
    "DelegateCall",
    "LoweredModule",
    "MAX_SCRATCH_SPECS",
    "ScratchSpec",
    "UnrunnableOp",
    "load_lowered_module",
    "scratch_specs_of",
]

#: Most scratch buffers one lowered module may declare (a backend declares a handful at most).
MAX_SCRATCH_SPECS = 4096


@dataclass(frozen=True, slots=True)
class ScratchSpec:
    """A scratch buffer a delegate's backend needs during one call (``DelegateScratchSpec`` upstream).

    The memory planner gives it ``nbytes`` bytes of the arena (pool ``mem_id``, None for the
    default) and the program passes it to the delegate as a ``uint8`` argument after the call's
    inputs and outputs; the runtime logs it with them.
    """

    nbytes: int
    mem_id: int | None = None


def scratch_specs_of(value: object) -> tuple[ScratchSpec, ...]:
    """The ``scratch_specs`` JSON of a lowered module (absent or null: none).

    Raises:
        ValueError: Not a list of ``{"nbytes": positive int, "mem_id": int >= 1 or null}`` objects,
            or more than :data:`MAX_SCRATCH_SPECS` of them (the caller names the file).
    """
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ValueError(f"scratch_specs is a {type(value).__name__}, not a list")
    if len(value) > MAX_SCRATCH_SPECS:
        raise ValueError(f"scratch_specs lists {len(value)} buffers, more than {MAX_SCRATCH_SPECS}")
    specs = []
    for index, spec in enumerate(value):
        nbytes = spec.get("nbytes") if isinstance(spec, dict) else None
        mem_id = spec.get("mem_id") if isinstance(spec, dict) else None
        if not _is_int(nbytes) or nbytes < 1:
            raise ValueError(f"scratch_specs[{index}] has nbytes {nbytes!r:.40}, not a positive integer")
        if mem_id is not None and (not _is_int(mem_id) or mem_id < 1):
            raise ValueError(f"scratch_specs[{index}] has mem_id {mem_id!r:.40}, not null or an integer >= 1")
        specs.append(ScratchSpec(nbytes, mem_id))
    return tuple(specs)


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)

#: The op type name the reference shows for a delegate call node.
DELEGATE_OP_TYPE = "executorch_call_delegate"


class _Placeholder(HigherOrderOperator):
    """Deserialization-time target for nodes whose inputs must be read without a schema."""

    def __init__(self) -> None:
        super().__init__("numdiff_deserialize_placeholder")  # type: ignore[no-untyped-call]

    def __call__(self, *args: object, **kwargs: object) -> object:
        raise CaptureError("numdiff internal placeholder operator was executed; it should have been replaced")


PLACEHOLDER_HOP = _Placeholder()
#: The serialized target name that resolves to :data:`PLACEHOLDER_HOP`.
PLACEHOLDER_TARGET = "torch.ops.higher_order.numdiff_deserialize_placeholder"


class LoweredModule(torch.nn.Module):
    """A delegated partition as the ETRecord describes it.

    Attributes:
        backend_id: Backend that compiled the partition (e.g. ``"XnnpackBackend"``).
        processed_bytes: The backend's compiled blob.
        compile_specs: ``(key, value)`` pairs given to the backend.
        original_module: The partition's program before lowering, or ``None`` if the file has none.
        named_data_store: The serialized named-data store (raw JSON text), if any.
        scratch_specs: The scratch buffers the backend declared (empty before export schema 5.5).
    """

    def __init__(
        self,
        backend_id: str,
        processed_bytes: bytes,
        compile_specs: list[tuple[str, bytes]],
        original_module: torch.export.ExportedProgram | None,
        named_data_store: str | None = None,
        unrunnable_reason: str | None = None,
        scratch_specs: tuple[ScratchSpec, ...] = (),
    ) -> None:
        super().__init__()
        self.backend_id = backend_id
        self.processed_bytes = processed_bytes
        self.compile_specs = compile_specs
        self.original_module = original_module
        self.named_data_store = named_data_store
        self.unrunnable_reason = unrunnable_reason
        self.scratch_specs = scratch_specs
        #: Whether the graph reads this delegate's result by index (set by the loader).
        self.returns_sequence = True
        self._runner: torch.nn.Module | None = None

    def forward(self, *args: object) -> object:
        """Run the partition's original program on ``args``.

        Raises:
            CaptureError: The ETRecord holds no runnable original program for this partition.
        """
        if self.original_module is None or self.unrunnable_reason is not None:
            raise CaptureError(
                f"cannot run the {self.backend_id} delegate: {self.unrunnable_reason or 'no original program'}\n"
                "Compare against the graph before lowering (edge_dialect_program or exported_program) instead."
            )
        if self._runner is None:
            self._runner = self.original_module.module()
        out = self._runner(*self._inputs(args))
        if self.returns_sequence and isinstance(out, torch.Tensor):
            return (out,)
        return out


    def _inputs(self, args: tuple[object, ...]) -> tuple[object, ...]:
        """``args`` without the scratch buffers a program after ``to_executorch`` passes after the inputs.

        The original program's user inputs say how many of ``args`` are inputs: ``len(scratch_specs)``
        more are the scratch (``memory.alloc`` buffers, appended by the scratch pass); any other
        count is refused rather than guessed.
        """
        if not self.scratch_specs or self.original_module is None:
            return args
        from torch.export.graph_signature import InputKind

        wanted = sum(1 for spec in self.original_module.graph_signature.input_specs if spec.kind == InputKind.USER_INPUT)
        if len(args) == wanted:
            return args
        if len(args) == wanted + len(self.scratch_specs):
            return args[:wanted]
        raise CaptureError(
            f"the {self.backend_id} delegate was called with {len(args)} arguments; its original program takes "
            f"{wanted} and its lowered module declares {len(self.scratch_specs)} scratch buffer(s)\n"
            "The ETRecord's program and its lowered module disagree: record the ETRecord again from one export.")


class DelegateCall:
    """Call-function target of a delegate node: ``executorch_call_delegate(lowered_module, *inputs)``."""

    __name__ = DELEGATE_OP_TYPE
    __qualname__ = DELEGATE_OP_TYPE

    def __call__(self, lowered_module: LoweredModule, *args: object) -> object:
        out = lowered_module(*args)
        # A delegate returns a tuple of outputs; a lone tensor output is returned as is,
        # exactly as the serialized graph expects (a single-tensor delegate has no getitem users).
        if isinstance(out, list):
            return tuple(out)
        return out

    def __repr__(self) -> str:
        return DELEGATE_OP_TYPE


#: The one delegate-call target every loaded graph uses.
DELEGATE_CALL = DelegateCall()


class UnrunnableOp:
    """Stand-in target for an operator this process cannot run.

    Args:
        name: The operator name as serialized (also its ``__name__``, as in the reference).
        reason: Why it cannot run; also stored in ``node.meta["numdiff_unrunnable"]``.
    """

    def __init__(self, name: str, reason: str) -> None:
        self.__name__ = name
        self.__qualname__ = name.replace(".", "_")
        self.reason = reason

    def __call__(self, *args: object, **kwargs: object) -> object:
        raise CaptureError(f"operator {self.__name__!r} cannot run: {self.reason}")

    def __repr__(self) -> str:
        return f"UnrunnableOp({self.__name__!r})"


def load_lowered_module(text: str, load: Callable[..., torch.export.ExportedProgram]) -> LoweredModule:
    """A delegate's lowered module from the JSON text ExecuTorch writes as the call's first argument.

    ``load`` loads the partition's original program (parsed JSON, state dict, constants, example inputs).
    """
    from numdiff.program.graph_meta import ProgramLoadError

    try:
        data = json.loads(text)
        backend_id = str(data["backend_id"])
        processed = base64.b64decode(data["processed_bytes"])
        specs = [(str(cs["key"]), base64.b64decode(cs["value"])) for cs in data.get("compile_specs", [])]
        scratch = scratch_specs_of(data.get("scratch_specs"))
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise ProgramLoadError(f"delegate's lowered module is unreadable: {type(e).__name__}: {e}") from e
    original = None
    reason = None
    if data.get("original_module") is not None:
        try:
            original = load(
                data["original_module"],
                base64.b64decode(data.get("original_state_dict") or ""),
                base64.b64decode(data.get("original_constants") or ""),
                b"",
            )
        except ProgramLoadError as e:
            reason = f"its original program does not load: {e.problem}"
    else:
        reason = "the ETRecord stores no original program for it"
    return LoweredModule(backend_id, processed, specs, original, data.get("named_data_store"), reason, scratch)
