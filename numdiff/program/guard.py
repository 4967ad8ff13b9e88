"""Check a serialized program before anything turns its strings into code or callables.

torch's export deserializer and ``torch.fx`` turn several strings of a program JSON into live
objects or Python source: operator names are resolved by attribute walks, value names become
variable names in generated ``forward`` code, symbolic expressions go through ``sympy.sympify``
(which evaluates Python), pytree contexts and forward-argument names are pasted into code, and
``source_fn_stack`` entries are resolved as attribute chains. :func:`guard_program` looks at all
of them first:

* every operator name (every node of every subgraph, ``as_operator`` arguments) must pass the
  allow-list of :mod:`numdiff.program._allowlist`; all refused names are reported in one error;
* keyword-argument names of registered operators must be argument names of the operator's schema;
* value names that are not plain identifiers are mapped to generated ``_nd_<n>`` names
  (:class:`ProgramNames`; the loaders keep the original in ``node.meta["numdiff_original_name"]``);
* state-dict keys, module paths, symbol names, symbolic expressions and pytree specs must match
  strict grammars.

Anything refused is a :class:`~numdiff.program.graph_meta.ProgramLoadError`; the ETRecord reader
turns it into an :class:`~numdiff.errors.ETRecordError` naming the file and the entry.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from numdiff.program.graph_meta import ProgramLoadError
from numdiff.program._allowlist import ForbiddenOperator, classify_target, is_plain_identifier, is_safe_value_name

__all__ = ["ORIGINAL_NAME_KEY", "ProgramNames", "guard_program", "prepare_for_torch"]

#: Node meta key holding a value's name as the file wrote it, when numdiff had to rename it.
ORIGINAL_NAME_KEY = "numdiff_original_name"
MAX_SUBGRAPH_DEPTH = 16
MAX_REPORTED = 8
_HINT = (
    "ExecuTorch never writes such names: the file was modified or crafted. numdiff does not run or import "
    "anything named by a file; use an ETRecord written by ETRecord.save()."
)
_FQN_PART = re.compile(r"[A-Za-z0-9_]+\Z")
_SPEC_KEY = re.compile(r"[A-Za-z0-9_.]*\Z")
_SYMBOL = re.compile(r"[a-z]+[0-9]+\Z")
_EXPR_TOKEN = re.compile(r"\s*(?:([0-9]+(?:\.[0-9]+)?(?:e[-+]?[0-9]+)?)|([A-Za-z_][A-Za-z0-9_]*)|(\*\*|//|<=|>=|==|!=|[-+*/%(),<>]))")
# Functions a symbolic shape expression may call (torch's sympy helpers and sympy's own).
_EXPR_FUNCTIONS = frozenset({
    "FloorDiv", "ModularIndexing", "Where", "PythonMod", "Mod", "CleanDiv", "CeilToInt", "FloorToInt",
    "CeilDiv", "LShift", "RShift", "PowByNatural", "FloatPow", "FloatTrueDiv", "IntTrueDiv",
    "IsNonOverlappingAndDenseIndicator", "TruncToFloat", "TruncToInt", "RoundToInt", "RoundDecimal",
    "ToFloat", "Identity", "Max", "Min", "Eq", "Ne", "Lt", "Le", "Gt", "Ge", "And", "Or", "Not",
    "True", "False", "oo", "floor", "ceiling", "Abs", "sqrt",
})
_MAX_EXPR = 4096
_VALUE_MAPS = ("tensor_values", "sym_int_values", "sym_bool_values", "sym_float_values", "custom_obj_values")
_FQN_KEYS = ("parameter_name", "buffer_name", "tensor_constant_name", "custom_obj_name", "fqn")


@dataclass(slots=True)
class ProgramNames:
    """Value names of a program that numdiff renames, original → safe, and back."""

    renamed: dict[str, str] = field(default_factory=dict)
    original: dict[str, str] = field(default_factory=dict)

    def safe(self, name: object) -> str:
        """The name to use in generated code for ``name`` (itself when already safe)."""
        return self.renamed.get(name, name) if isinstance(name, str) else str(name)


_HOP_HINT = (
    "numdiff runs only the higher-order operators cond, map_impl and while_loop (it never resolves other "
    "operator names from a file). If ExecuTorch wrote this file, please report the operator to numdiff; "
    "meanwhile use a reference graph without it (e.g. reference_graph='edge_dialect_exported_program')."
)


def _fail(problem: str, hint: str = _HINT) -> ProgramLoadError:
    return ProgramLoadError(problem, hint)


def _check_fqn(value: object, what: str) -> None:
    if not isinstance(value, str) or (value and not all(_FQN_PART.match(p) for p in value.split("."))):
        raise _fail(f"{what} {str(value)[:80]!r} is not a dotted attribute path")


def _check_expr(text: object) -> None:
    """Refuse a symbolic expression that is anything but small arithmetic on shape symbols.

    ``sympy.sympify`` evaluates its input as Python, and exact integer powers can take forever
    (``9**9**9``): only symbols, listed functions, short numbers and at most a few ``**`` with a
    small or symbolic exponent pass.
    """
    if not isinstance(text, str) or len(text) > _MAX_EXPR:
        raise _fail(f"symbolic expression {str(text)[:80]!r} is not a string of at most {_MAX_EXPR} characters")
    tokens: list[tuple[str | None, str | None, str | None]] = []
    pos, depth = 0, 0
    while pos < len(text.rstrip()):
        match = _EXPR_TOKEN.match(text, pos)
        if match is None:
            raise _fail(f"symbolic expression {text[:80]!r} has an unexpected character at {pos}")
        number, name, op = match.groups()
        if name is not None and name not in _EXPR_FUNCTIONS and _SYMBOL.match(name) is None:
            raise _fail(f"symbolic expression {text[:80]!r} names {name[:40]!r}, which is no shape symbol or function")
        if number is not None and len(number) > 24:
            raise _fail(f"symbolic expression {text[:80]!r} has a number longer than 24 characters")
        depth += 1 if op == "(" else -1 if op == ")" else 0
        if depth > 64 or depth < 0:
            raise _fail(f"symbolic expression {text[:80]!r} has unbalanced or too deep parentheses")
        tokens.append((number, name, op))
        pos = match.end()
    powers = [i for i, token in enumerate(tokens) if token[2] == "**"]
    for i in powers:
        exponent = tokens[i + 1] if i + 1 < len(tokens) else (None, None, None)
        follows = tokens[i + 2][2] if i + 2 < len(tokens) else None
        small = exponent[0] is not None and exponent[0].isdigit() and int(exponent[0]) <= 64
        if len(powers) > 4 or not (small or exponent[1] is not None) or follows == "**":
            raise _fail(f"symbolic expression {text[:80]!r} has a power numdiff will not evaluate")


def _check_treespec(text: object, where: str) -> None:
    """Pytree specs become generated code (dict keys, argument names): only plain names allowed."""
    if text is None or text == "":
        return
    try:
        stack = [json.loads(text)[1]] if isinstance(text, str) else [None]
    except (ValueError, TypeError, IndexError, KeyError, RecursionError) as e:
        raise _fail(f"{where}: pytree spec is not readable JSON ({type(e).__name__})") from e
    seen = 0
    while stack:
        spec = stack.pop()
        seen += 1
        if not isinstance(spec, dict) or seen > 100_000:
            raise _fail(f"{where}: malformed pytree spec")
        kind = spec.get("type")
        if kind is not None:
            _check_fqn(kind, f"{where}: pytree type")
        context = spec.get("context")
        try:
            value = json.loads(context) if isinstance(context, str) else context
        except (ValueError, RecursionError) as e:
            raise _fail(f"{where}: pytree context is not JSON") from e
        items = value if isinstance(value, list) else [value]
        for item in items:
            if isinstance(item, str) and _SPEC_KEY.match(item) is None:
                raise _fail(f"{where}: pytree key {item[:80]!r} is not a plain name")
            if not isinstance(item, (str, int, float, bool, type(None))):
                raise _fail(f"{where}: pytree context holds a {type(item).__name__}")
        stack.extend(spec.get("children_spec") or [])


def _schema_arguments(target: str) -> frozenset[str] | None:
    """Argument names of the registered operator a (possibly Edge) name runs, if any."""
    from numdiff.program._edge_ops import resolve_target

    resolved = resolve_target(target)
    if resolved.target is None:
        return None
    ref = classify_target(resolved.target)
    if ref.kind != "overload":
        return None
    return frozenset(a.name for a in ref.op._schema.arguments)


def _iter_arguments(value: object) -> Iterator[tuple[str, Any]]:
    """``(kind, payload)`` of an Argument JSON and of the arguments nested in lists of it."""
    if isinstance(value, dict) and len(value) == 1:
        (kind, payload), = value.items()
        yield kind, payload
        if isinstance(payload, list):
            for item in payload:
                yield from _iter_arguments(item)


def _check_graph(graph: object, depth: int, bad: dict[str, str], problems: list[str], crafted: list[bool]) -> None:
    if depth > MAX_SUBGRAPH_DEPTH:
        raise _fail(f"subgraphs nest deeper than {MAX_SUBGRAPH_DEPTH} levels")
    if not isinstance(graph, dict):
        raise _fail("a graph is not a JSON object")
    for node in graph.get("nodes") or []:
        if not isinstance(node, dict):
            raise _fail("a graph node is not a JSON object")
        target = node.get("target")
        try:
            ref = classify_target(target)
        except ForbiddenOperator as e:
            bad.setdefault(e.target, e.reason)
            crafted[0] = crafted[0] or not e.well_formed
            continue
        allowed = _schema_arguments(ref.serialized) if ref.kind in ("overload", "edge") else None
        inputs = node.get("inputs") or []
        for named in inputs:
            if not isinstance(named, dict):
                raise _fail(f"node {str(node.get('name'))[:80]!r}: an argument is not a JSON object")
            for kind, payload in _iter_arguments(named.get("arg")):
                if kind == "as_operator":
                    try:
                        if classify_target(payload).kind not in ("overload", "builtin", "higher_order"):
                            bad.setdefault(str(payload), "operator argument is not a runnable torch operator")
                            crafted[0] = True
                    except ForbiddenOperator as e:
                        bad.setdefault(e.target, e.reason)
                        crafted[0] = True
                elif kind == "as_graph" and isinstance(payload, dict):
                    _check_graph(payload.get("graph"), depth + 1, bad, problems, crafted)
        for named in inputs:
            name = named.get("name")
            if name != "" and not is_plain_identifier(name):
                problems.append(f"node {str(node.get('name'))[:80]!r}: argument name {str(name)[:80]!r} is not a plain identifier")
            elif allowed is not None and name not in allowed:
                problems.append(
                    f"node {str(node.get('name'))[:80]!r}: operator {target!r} has no argument {name!r} "
                    f"(its arguments: {sorted(allowed)})"
                )


def _value_name_slots(program: dict[str, Any]) -> Iterator[tuple[Any, Any, bool]]:
    """Every place a value name sits: ``(container, key, is_dict_key)``."""
    stack: list[Any] = [program]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
            continue
        if not isinstance(item, dict):
            continue
        for key, value in item.items():
            if key in ("name", "as_name", "user_input_name") and isinstance(value, str) and "arg" not in item:
                yield item, key, False
            elif key in _VALUE_MAPS and isinstance(value, dict):
                for name in list(value):
                    yield value, name, True
                stack.extend(value.values())
            elif isinstance(value, (dict, list)):
                stack.append(value)


def _check_strings(program: dict[str, Any]) -> None:
    """State-dict keys, module paths, expressions, symbols and pytree specs (everything but names)."""
    stack: list[Any] = [program]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            for key, value in item.items():
                if key in _FQN_KEYS:
                    _check_fqn(value, key.replace("_", " "))
                elif key == "expr_str":
                    _check_expr(value)
                elif key in ("in_spec", "out_spec"):
                    _check_treespec(value, key.replace("_", " "))
                elif key == "forward_arg_names":
                    for name in value if isinstance(value, list) else [value]:
                        if not is_plain_identifier(name) or name == "self":
                            raise _fail(f"forward argument name {str(name)[:80]!r} is not a plain identifier")
                elif isinstance(value, (dict, list)):
                    stack.append(value)
    constraints = program.get("range_constraints") or {}
    if not isinstance(constraints, dict):
        raise _fail(f"field range_constraints is a {type(constraints).__name__}, not an object",
                    "The program is damaged or was edited: use an ETRecord written by ETRecord.save().")
    for symbol in constraints:
        if not isinstance(symbol, str) or _SYMBOL.match(symbol) is None:
            raise _fail(f"range constraint for {str(symbol)[:80]!r}, which is not a shape symbol name")


def guard_program(program: dict[str, Any]) -> ProgramNames:
    """Refuse what could run code; return the renames value names need.

    Raises:
        ProgramLoadError: An operator name is refused (all of them listed), or a name, path,
            expression or spec does not match its grammar.
    """
    from numdiff.program._edge_ops import ensure_ops_registered

    ensure_ops_registered()
    graph_module = program.get("graph_module")
    if not isinstance(graph_module, dict):
        raise _fail("program has no graph_module object")
    bad: dict[str, str] = {}
    problems: list[str] = []
    crafted = [False]
    _check_graph(graph_module.get("graph"), 0, bad, problems, crafted)
    if bad:
        listed = "; ".join(f"{t[:120]!r} ({why})" for t, why in list(bad.items())[:MAX_REPORTED])
        more = f" and {len(bad) - MAX_REPORTED} more" if len(bad) > MAX_REPORTED else ""
        problem = f"refused {len(bad)} operator name(s) numdiff will not resolve: {listed}{more}"
        raise _fail(problem, _HINT if crafted[0] else _HOP_HINT)
    if problems:
        raise _fail(problems[0] + (f" (and {len(problems) - 1} more such arguments)" if len(problems) > 1 else ""))
    _check_strings(program)
    names = ProgramNames()
    found = [key if is_dict else container[key] for container, key, is_dict in _value_name_slots(program)]
    taken = set(found)
    for name in dict.fromkeys(found):  # each distinct name once, in the order it first appears
        if not is_safe_value_name(name) and name not in names.renamed:
            safe = f"_nd_{len(names.renamed)}"
            while safe in taken:
                safe += "_"
            names.renamed[name] = safe
            names.original[safe] = name
    return names


def _drop_source_fn_stacks(graph: object, depth: int = 0) -> None:
    for node in graph.get("nodes") or [] if isinstance(graph, dict) and depth <= MAX_SUBGRAPH_DEPTH else []:
        if isinstance(node.get("metadata"), dict):
            node["metadata"].pop("source_fn_stack", None)
        for named in node.get("inputs") or []:
            for kind, payload in _iter_arguments(named.get("arg")):
                if kind == "as_graph" and isinstance(payload, dict):
                    _drop_source_fn_stacks(payload.get("graph"), depth + 1)


def prepare_for_torch(program: dict[str, Any], names: ProgramNames) -> None:
    """Make a guarded program safe for torch's deserializer, in place.

    Value names are rewritten with ``names``; ``source_fn_stack`` metadata is removed (torch
    resolves its type strings by attribute walks; the loader restores it as plain strings).
    """
    _drop_source_fn_stacks(program["graph_module"].get("graph"))
    if not names.renamed:
        return
    for container, key, is_dict in list(_value_name_slots(program)):
        if is_dict:
            if key in names.renamed:
                container[names.renamed[key]] = container.pop(key)
        elif container[key] in names.renamed:
            container[key] = names.renamed[container[key]]
