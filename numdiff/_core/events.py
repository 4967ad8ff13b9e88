"""Names of the runtime's own events, told apart from the model's operators (one definition each)."""

from __future__ import annotations

__all__ = ["DELEGATE_CALL", "EXECUTE", "FRAMEWORK_EVENTS", "OPERATOR_CALL", "is_runtime_step", "is_wrapper"]

#: The runtime's framework steps that the reference leaves out when it links events to graph nodes.
FRAMEWORK_EVENTS = frozenset({"Method::init", "Program::load_method", "Method::execute"})

#: The event timing one whole execution of a method.
EXECUTE = "Method::execute"

#: The event wrapping each portable operator call, and the one wrapping each delegate call.
OPERATOR_CALL = "OPERATOR_CALL"
DELEGATE_CALL = "DELEGATE_CALL"

_RUNTIME_PREFIXES = ("Method::", "Program::")


def is_runtime_step(name: str) -> bool:
    """Whether ``name`` is a step of the runtime itself (``Method::*`` or ``Program::*``), not an op."""
    return name.startswith(_RUNTIME_PREFIXES)


def is_wrapper(name: str) -> bool:
    """Whether ``name`` times something around ops rather than one op: a runtime step or a call wrapper."""
    return is_runtime_step(name) or name in (OPERATOR_CALL, DELEGATE_CALL)
