"""What the profiling view needs from a serialized program, read straight from its JSON (no torch).

Linking runtime events to the graph needs, per op node, only its name, op type, debug handle,
stack trace and module stacks. Those are plain strings in the program JSON ExecuTorch writes, so
they are read here without importing torch or building an ``ExportedProgram`` (which, for a model
of a few thousand ops, costs seconds). ``tests/schema/test_graph_meta.py`` checks that these
records equal what the fully loaded programs carry, on every fixture.

Also here, because both readers share them: the program header check and the op-type naming rule.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from numdiff.errors import InputError

__all__ = [
    "BACKEND_PREFIX",
    "DELEGATE_OP_TYPE",
    "DELEGATE_TARGET",
    "EDGE_PREFIX",
    "NodeProvenance",
    "OpNodeInfo",
    "ProgramLoadError",
    "SUPPORTED_SCHEMA_MAJOR",
    "TORCH_OPS_PREFIX",
    "check_header",
    "op_nodes_from_json",
    "op_type_for",
    "parse_nn_module_stack",
    "parse_source_fn_stack",
    "provenance_from_json",
]

EDGE_PREFIX = "executorch.exir.dialects.edge.ops."
BACKEND_PREFIX = "executorch.exir.dialects.backend.ops."
TORCH_OPS_PREFIX = "torch.ops."
DELEGATE_TARGET = "torch.ops.higher_order.executorch_call_delegate"
DELEGATE_OP_TYPE = "executorch_call_delegate"
#: Major version of the export schema ExecuTorch 1.x writes.
SUPPORTED_SCHEMA_MAJOR = 5
KNOWN_DIALECTS = frozenset({"EDGE", "ATEN", "TRAINING", ""})
_STACK_DELIMITER = ";"


class ProgramLoadError(InputError):
    """Raised with the problem and hint; the ETRecord reader adds the file and entry.

    An :class:`~numdiff.errors.InputError`, so that even where no reader adds context it is a
    named numdiff error, never an escape.
    """

    def __init__(self, problem: str, hint: str = "") -> None:
        super().__init__(problem + (f"\n{hint}" if hint else ""))
        self.problem = problem
        self.hint = hint


#: torch's own export schema (``torch.export.save`` archives; torch 2.13 writes 8.20), read only
#: inside :func:`accept_torch_schema` (numdiff.schema.pt2).
TORCH_SCHEMA_MAJOR = 8
_ACCEPTED: contextvars.ContextVar[tuple[int, ...]] = contextvars.ContextVar(
    "numdiff_schema_majors", default=(SUPPORTED_SCHEMA_MAJOR,))


@contextlib.contextmanager
def accept_torch_schema() -> Iterator[None]:
    """Within the block, programs of torch's own export schema (major 8) pass :func:`check_header` too."""
    token = _ACCEPTED.set((SUPPORTED_SCHEMA_MAJOR, TORCH_SCHEMA_MAJOR))
    try:
        yield
    finally:
        _ACCEPTED.reset(token)


def check_header(program: object) -> None:
    """Reject what is not an exported program of a schema and dialect numdiff reads."""
    if not isinstance(program, dict):
        raise ProgramLoadError("program JSON is not an object")
    version = program.get("schema_version")
    if not isinstance(version, dict) or "major" not in version:
        raise ProgramLoadError("not an exported program (no schema_version)")
    major, minor = version.get("major"), version.get("minor")
    if major not in _ACCEPTED.get() and (major, minor) != (0, 0):
        newer = isinstance(major, int) and major > max(_ACCEPTED.get())
        raise ProgramLoadError(
            f"unknown export schema version {major}.{minor}",
            f"numdiff reads the export schema ExecuTorch 0.7 to 1.5 writes (major {SUPPORTED_SCHEMA_MAJOR}: 5.3 in 0.7 "
            "and 1.0, 5.4 in 1.5). "
            + ("A newer major comes from an ExecuTorch release newer than this numdiff knows: update numdiff."
               if newer else "This major is not one any ExecuTorch release from 0.7 on writes: the file was altered "
               "or written by another tool; export the model again with ExecuTorch 0.7 or later."),
        )
    verifiers, dialect = program.get("verifiers") or [], program.get("dialect") or ""
    if not isinstance(verifiers, list) or not all(isinstance(v, str) for v in verifiers) or not isinstance(dialect, str):
        raise ProgramLoadError(f"fields verifiers/dialect are {verifiers!r:.60}/{dialect!r:.60}, not strings")
    dialects = [*verifiers, dialect]
    unknown = [d for d in dialects if d not in KNOWN_DIALECTS]
    if unknown:
        raise ProgramLoadError(
            f"unknown program dialect {unknown[0]!r}", f"known dialects: {sorted(d for d in KNOWN_DIALECTS if d)}"
        )
    if "graph_module" not in program:
        raise ProgramLoadError("not an exported program (no graph_module)")


def op_type_for(serialized: str) -> str:
    """The op type the reference shows for a serialized target (its loaded ``target.__name__``).

    Example:
        >>> op_type_for("executorch.exir.dialects.edge.ops.aten.relu.default")
        'aten.relu.default'
        >>> op_type_for("torch.ops.aten.conv2d.default")
        'conv2d.default'
    """
    if len(serialized) <= _CACHED_TARGET_CHARS:  # a graph repeats a few targets many times
        return _cached_op_type(serialized)
    return _op_type(serialized)


#: Targets up to this long are cached (bounded memory: at most 4096 of them).
_CACHED_TARGET_CHARS = 256


def _op_type(serialized: str) -> str:
    if serialized == DELEGATE_TARGET:
        return DELEGATE_OP_TYPE
    for prefix in (EDGE_PREFIX, BACKEND_PREFIX):
        if serialized.startswith(prefix):
            qualified = serialized[len(prefix):]
            return qualified if len(qualified.split(".")) == 3 else serialized
    if serialized.startswith(TORCH_OPS_PREFIX):
        parts = serialized[len(TORCH_OPS_PREFIX):].split(".")
        if len(parts) == 3 and parts[0] != "higher_order":
            return f"{parts[1]}.{parts[2]}"
        return parts[-1]
    if serialized.startswith(("_operator.", "math.", "torch.")):
        return serialized.rsplit(".", 1)[-1]
    return serialized


_cached_op_type = functools.lru_cache(maxsize=4096)(_op_type)


def _split_top_level(item: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    if "[" not in item and "(" not in item:  # the usual case: no brackets, split at C speed
        return [part.strip() for part in item.split(",")]
    parts, start, depth = [], 0, 0
    for i, ch in enumerate(item):
        if ch in "[(":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(item[start:i].strip())
            start = i + 1
    parts.append(item[start:].strip())
    return parts


def parse_nn_module_stack(text: str) -> dict[str, tuple[str, str]]:
    """``"key,path,type;..."`` → ``{key: (path, type)}`` (commas inside brackets do not split)."""
    if len(text) <= _CACHED_STACK_CHARS:  # a fresh dict each time: callers may change it
        return dict(_parsed_stack(text))
    return dict(_parse_stack(text))


#: Stack strings up to this long are cached (bounded memory: at most 4096 of them).
_CACHED_STACK_CHARS = 2048


@functools.lru_cache(maxsize=4096)
def _parsed_stack(text: str) -> tuple[tuple[str, tuple[str, str]], ...]:
    """Nodes of one module share their stack string: parse each distinct one once."""
    return _parse_stack(text)


def _parse_stack(text: str) -> tuple[tuple[str, tuple[str, str]], ...]:
    stack: dict[str, tuple[str, str]] = {}
    for item in text.split(_STACK_DELIMITER):
        parts = _split_top_level(item)
        if len(parts) != 3:
            raise ProgramLoadError(f"malformed nn_module_stack item {item!r}")
        stack[parts[0]] = (parts[1], parts[2])
    return tuple(stack.items())


def parse_source_fn_stack(text: str) -> list[tuple[str, str]]:
    """``"name,type;..."`` → ``[(name, type), ...]``."""
    out = []
    for item in text.split(_STACK_DELIMITER):
        name, _, kind = item.partition(",")
        out.append((name.strip(), kind.strip()))
    return out


@dataclass(frozen=True, slots=True)
class OpNodeInfo:
    """One op node as the profiling view sees it (the fields ``fx.Node`` would give it)."""

    name: str
    op_type: str
    debug_handle: int | None
    stack_trace: str | None
    nn_module_stack: dict[str, tuple[str, str]] | None
    source_fn_stack: list[tuple[str, str]] | None


_READ_META = ("debug_handle", "nn_module_stack", "source_fn_stack", "stack_trace", "from_node")


def _top_nodes(program: dict[str, Any]) -> Iterator[tuple[dict[str, Any], str, dict[str, Any]]]:
    """``(node, target, metadata)`` of the top-level graph, with the shapes these readers rely on checked.

    Raises:
        ProgramLoadError: Naming the node and the field that is not what ExecuTorch writes.
    """
    module = program.get("graph_module")
    graph = module.get("graph", {}) if isinstance(module, dict) else None
    nodes = graph.get("nodes", []) if isinstance(graph, dict) else None
    if not isinstance(nodes, list):
        raise ProgramLoadError("field graph_module.graph.nodes is not a list")
    seen: set[str] = set()
    for index, node in enumerate(nodes):
        if not isinstance(node, dict) or not isinstance(node.get("name"), str):
            raise ProgramLoadError(f"node {index} is not an object with a string name")
        if node["name"] in seen:  # a graph's node names are unique: a repeat is a damaged file
            raise ProgramLoadError(f"node {index} repeats the name {node['name'][:80]!r} of an earlier node")
        seen.add(node["name"])
        target, meta = node.get("target"), node.get("metadata") or {}
        if not isinstance(target, str) or not isinstance(meta, dict):
            raise ProgramLoadError(f"node {node['name']!r}: field target or metadata has the wrong type")
        for key in _READ_META:
            if not isinstance(meta.get(key, ""), str):
                raise ProgramLoadError(f"node {node['name']!r}: field metadata.{key} is not a string")
        yield node, target, meta


def op_nodes_from_json(program: dict[str, Any]) -> list[OpNodeInfo]:
    """Op nodes of a serialized program's top-level graph, in graph order (getitems excluded)."""
    out = []
    for node, target, meta in _top_nodes(program):
        if target.endswith("getitem"):
            continue
        handle = _debug_handle(node, meta)
        module_stack = meta.get("nn_module_stack")
        source_fn = meta.get("source_fn_stack")
        out.append(OpNodeInfo(
            name=node["name"],
            op_type=op_type_for(target),
            debug_handle=handle,
            stack_trace=meta.get("stack_trace"),
            nn_module_stack=parse_nn_module_stack(module_stack) if module_stack else None,
            source_fn_stack=parse_source_fn_stack(source_fn) if source_fn else None,
        ))
    return out


@dataclass(frozen=True, slots=True)
class NodeProvenance:
    """An Edge node's debug handle and ``from_node`` ancestry, nearest ancestor first.

    ``ancestors`` follows the last ``from_node`` entry at each step, as ``(name, str(graph_id))``.
    """

    name: str
    debug_handle: int | None
    ancestors: tuple[tuple[str, str], ...]


def provenance_from_json(program: dict[str, Any]) -> list[NodeProvenance] | None:
    """Provenance of every top-level node; None when the graph has control-flow subgraphs.

    Debug-handle back-propagation needs only this from the Edge program, so it need not be
    loaded. Subgraphs of ``cond``/``map``/``scan`` are not in the top-level node list: for such
    programs callers load the program and walk it instead.
    """
    from numdiff.limits import current_limits

    depth = current_limits().max_nesting_depth  # once: a program may have a million nodes
    out = []
    for node, target, meta in _top_nodes(program):
        if target.startswith(TORCH_OPS_PREFIX + "higher_order.") and target != DELEGATE_TARGET:
            return None
        handle = _debug_handle(node, meta)
        out.append(NodeProvenance(node["name"], handle, _ancestors(meta.get("from_node"), depth)))
    return out


def _debug_handle(node: dict[str, Any], meta: dict[str, Any]) -> int | None:
    raw = meta.get("debug_handle")
    try:
        if raw and len(raw) > 20:
            raise ValueError("too long")
        return int(raw) if raw else None
    except ValueError as e:
        raise ProgramLoadError(f"node {node.get('name')!r} has a non-integer debug_handle {raw!r}") from e


def _ancestors(raw: object, depth: int) -> tuple[tuple[str, str], ...]:
    from numdiff._core.safe_json import loads_checked

    try:
        sources = loads_checked(raw, depth) if isinstance(raw, str) else raw
    except ValueError as e:
        raise ProgramLoadError(f"malformed from_node metadata: {e}", getattr(e, "hint", "")) from e
    ids: list[tuple[str, str]] = []
    while sources:
        if not isinstance(sources, list) or not isinstance(sources[-1], dict):
            raise ProgramLoadError(f"malformed from_node metadata: {type(sources).__name__} where a list of objects belongs")
        source = sources[-1]
        ids.append((str(source.get("name")), str(source.get("graph_id"))))
        sources = source.get("from_node") or []
    return tuple(ids)
