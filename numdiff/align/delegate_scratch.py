"""Drop the scratch buffers a delegate call logs after its outputs, before pairing.

Since export schema 5.5 (pytorch/executorch#21985) a backend may declare scratch buffers
(``scratch_specs`` of its lowered module). The program passes them to the delegate as ``uint8``
arguments after the call's inputs and outputs, and the runtime logs every argument of a delegate
call, so the ``DELEGATE_CALL`` event's debug data ends with them. Pairing reads a delegate's
outputs from the end of that data; left there, the scratch would be read as the outputs.

:func:`partition_scratch` reads, from a graph that holds the delegate calls (an Edge program
recorded after lowering), each lowered module's scratch sizes and the debug handles of its
original program: the runtime gives a delegate call exactly the union of those handles, which is
how a call is told to its lowered module. :func:`drop_scratch` removes the scratch values. It
refuses (never guesses) when it cannot tell which lowered module a call ran, or when the logged
values are not the declared buffers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from numdiff._core.events import DELEGATE_CALL
from numdiff._core.types import DebugHandle
from numdiff.align._records import RuntimeOutput
from numdiff.errors import MismatchedArtifactsError, MissingDataError

if TYPE_CHECKING:
    import torch

__all__ = ["PartitionScratch", "drop_scratch", "partition_scratch"]


@dataclass(frozen=True, slots=True)
class PartitionScratch:
    """One lowered module's scratch buffers.

    Attributes:
        backend: The backend id.
        handle_ids: Debug handles of the nodes of its original program (empty when the file
            stores no original program, then no call can be told to it by handle).
        nbytes: The size of each scratch buffer, in argument order (empty: none).
    """

    backend: str
    handle_ids: frozenset[int]
    nbytes: tuple[int, ...]


def _ids(handle: object) -> list[int]:
    if isinstance(handle, bool):
        return []
    if isinstance(handle, int):
        return [handle]
    if isinstance(handle, (tuple, list)):
        return [h for h in handle if isinstance(h, int) and not isinstance(h, bool)]
    return []


def _original_handles(module: object) -> frozenset[int]:
    original = getattr(module, "original_module", None)
    graph = getattr(original, "graph", None)
    if graph is None:
        return frozenset()
    ids: set[int] = set()
    for node in graph.nodes:
        if node.op == "call_function":
            ids.update(_ids(node.meta.get("debug_handle")))
    return frozenset(ids)


def _nbytes(module: object) -> tuple[int, ...]:
    """Sizes of ``module.scratch_specs`` (numdiff's :class:`~numdiff.program.ScratchSpec` or ExecuTorch's spec)."""
    specs = getattr(module, "scratch_specs", None) or ()
    return tuple(int(getattr(spec, "nbytes")) for spec in specs)


def partition_scratch(graph_modules: Iterable[torch.fx.GraphModule]) -> list[PartitionScratch]:
    """Every lowered module called in ``graph_modules`` (and their submodules), in graph order."""
    found: list[PartitionScratch] = []
    seen: set[int] = set()
    for root in graph_modules:
        for gm in root.modules():
            graph = getattr(gm, "graph", None)
            if graph is None:
                continue
            for node in graph.nodes:
                if node.op != "get_attr":
                    continue
                module = getattr(gm, str(node.target), None)
                if module is None or id(module) in seen or not hasattr(module, "backend_id"):
                    continue
                seen.add(id(module))
                found.append(PartitionScratch(str(getattr(module, "backend_id")), _original_handles(module), _nbytes(module)))
    return found


def _sizes_for(runtime: RuntimeOutput, partitions: list[PartitionScratch]) -> tuple[int, ...]:
    """The scratch sizes of the lowered module this delegate call ran; raises when that is unknown."""
    ids = set(runtime.handle)
    exact = {p.nbytes for p in partitions if p.handle_ids and p.handle_ids == ids}
    if not exact:
        exact = {p.nbytes for p in partitions if p.handle_ids and p.handle_ids <= ids}
    if not exact:  # a call whose ids an earlier call shares were dropped (align.runtime.own_delegate_ids)
        exact = {p.nbytes for p in partitions if p.handle_ids and ids <= p.handle_ids}
    if len(exact) == 1:
        return next(iter(exact))
    every = {p.nbytes for p in partitions}
    if not exact and len(every) == 1:  # every lowered module declares the same: no need to tell them apart
        return next(iter(every))
    declared = sorted({p.nbytes for p in partitions})
    found = "several lowered modules with different scratch" if exact else "no lowered module"
    raise MissingDataError(
        f"delegate call at instruction {runtime.instruction_id} (debug handle {runtime.handle}) matches {found} "
        f"of the ETRecord's program by debug handle, and the lowered modules declare different scratch buffers "
        f"(sizes in bytes: {', '.join(map(str, declared))}): numdiff cannot tell which of its logged values are "
        "scratch, and does not guess\n"
        "Record the ETRecord with the lowered program whose lowered modules keep their original programs "
        "(their debug handles tell the delegate calls apart), from the same export as the ETDump.")


def _is_scratch(value: object, nbytes: int) -> bool:
    import torch

    return (isinstance(value, torch.Tensor) and value.dtype == torch.uint8 and value.dim() == 1
            and value.numel() == nbytes)


def drop_scratch(
    runtime_outputs: Mapping[DebugHandle, RuntimeOutput], partitions: list[PartitionScratch]
) -> tuple[dict[DebugHandle, RuntimeOutput], tuple[str, ...]]:
    """``runtime_outputs`` without the scratch values at the end of each delegate call's data, and a note.

    Nothing changes when no lowered module declares scratch.

    Raises:
        MissingDataError: A delegate call cannot be told to one lowered module and the modules
            declare different scratch.
        MismatchedArtifactsError: A call logged fewer values than its outputs and scratch need, or
            its last values are not ``uint8`` buffers of the declared sizes (ETDump and ETRecord
            come from different exports).

    Example:
        >>> import torch
        >>> call = RuntimeOutput((1, 2), 3, "DELEGATE_CALL", [torch.ones(2), torch.ones(2), torch.zeros(8, dtype=torch.uint8)])
        >>> outs, notes = drop_scratch({(1, 2): call}, [PartitionScratch("B", frozenset({1, 2}), (8,))])
        >>> len(outs[(1, 2)].data), notes
        (2, ('dropped 1 scratch value(s) logged after the outputs of 1 delegate call(s) (scratch_specs of their lowered modules)',))
    """
    if not any(p.nbytes for p in partitions):
        return dict(runtime_outputs), ()
    out: dict[DebugHandle, RuntimeOutput] = {}
    dropped = calls = 0
    for handle, runtime in runtime_outputs.items():
        if runtime.op_name != DELEGATE_CALL:
            out[handle] = runtime
            continue
        sizes = _sizes_for(runtime, partitions)
        if not sizes:
            out[handle] = runtime
            continue
        data = runtime.data
        values = list(data) if isinstance(data, (list, tuple)) else [data]
        if len(values) < len(sizes) + runtime.num_outputs:
            raise MismatchedArtifactsError(
                f"delegate call at instruction {runtime.instruction_id} (debug handle {handle}) logged {len(values)} "
                f"values, fewer than its {runtime.num_outputs} output(s) and the {len(sizes)} scratch buffer(s) "
                "its lowered module declares\nPass the ETRecord and ETDump of the same export.")
        tail = values[len(values) - len(sizes):]
        wrong = [k for k, (value, n) in enumerate(zip(tail, sizes, strict=True)) if not _is_scratch(value, n)]
        if wrong:
            k = wrong[0]
            got = tail[k]
            shown = f"{got.dtype} {tuple(got.shape)}" if hasattr(got, "dtype") else type(got).__name__
            raise MismatchedArtifactsError(
                f"delegate call at instruction {runtime.instruction_id} (debug handle {handle}): logged value "
                f"{len(values) - len(sizes) + k} is {shown}, where its lowered module declares a scratch buffer "
                f"of {sizes[k]} bytes (uint8)\nPass the ETRecord and ETDump of the same export; numdiff does not "
                "guess which values are the delegate's outputs.")
        kept = values[:len(values) - len(sizes)]
        out[handle] = replace(runtime, data=kept if isinstance(data, (list, tuple)) else kept[0])
        dropped += len(sizes)
        calls += 1
    if not dropped:
        return out, ()
    return out, (f"dropped {dropped} scratch value(s) logged after the outputs of {calls} delegate call(s) "
                 "(scratch_specs of their lowered modules)",)
