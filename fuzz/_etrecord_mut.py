"""ETRecord mutations: zip level (names, methods, sizes, CRC, truncation, bombs), JSON level (values,
types, keys, nesting in every JSON entry, with the program JSON's targets, names, args and tensor
meta favoured), and the pickled entries' bytes (raw, inner-zip level, hostile pickles)."""

from __future__ import annotations

import json
import random
from typing import Any

from fuzz._values import byte_mutation, edge_int, hostile_string
from fuzz._zipraw import Entry, deflate_bomb, read_entries, write_zip

__all__ = ["BOMB_SIZES", "mutate_etrecord", "mutate_json", "mutate_map", "warm_bombs"]

BOMB_SIZES = (64 << 20, 600 << 20)


def warm_bombs() -> None:
    """Build the bombs once (the campaign does it before forking its workers)."""
    deflate_bomb(BOMB_SIZES[0], b"[")
    for size in BOMB_SIZES:
        deflate_bomb(size, b" ")

_NEST = "__numdiff_fuzz_nest__"
# keys of the serialized program where a lie does the most damage
_HOT_KEYS = frozenset({"target", "name", "arg", "as_tensor", "as_int", "as_ints", "as_tensors", "sizes", "strides",
                       "dtype", "storage_offset", "stack_trace", "nn_module_stack", "inputs", "outputs", "kind",
                       "as_scalar_type", "as_string", "as_float", "torch_fn", "source_fn_stack", "debug_handle",
                       "from_node", "layout", "device", "tensor_values", "nodes", "user_inputs", "user_outputs",
                       "graph_module", "signature", "range_constraints", "expr_str", "delegate", "custom"})


def _walk(node: Any, path: tuple[Any, ...], out: list[tuple[tuple[Any, ...], float]]) -> None:
    stack: list[tuple[Any, tuple[Any, ...]]] = [(node, path)]
    while stack:
        cur, p = stack.pop()
        if isinstance(cur, dict):
            for k, v in cur.items():
                out.append((p + (k,), 6.0 if k in _HOT_KEYS else 1.0))
                stack.append((v, p + (k,)))
        elif isinstance(cur, list):
            for i, v in enumerate(cur):
                out.append((p + (i,), 1.0))
                stack.append((v, p + (i,)))


def _random_json(rng: random.Random, canary: str) -> Any:
    return rng.choice([None, True, False, 0, -1, edge_int(rng), 2 ** 70, -(2 ** 70), 1.5, float("nan"),
                       float("inf"), "", hostile_string(rng, canary), [], {}, [None], {"": None},
                       {"as_tensor": {"name": hostile_string(rng, canary)}}, [[[[]]]], _NEST])


def mutate_json(doc: Any, rng: random.Random, canary: str) -> tuple[str, str]:
    """Mutate a parsed JSON document at one (weighted) place; returns the text and a description."""
    paths: list[tuple[tuple[Any, ...], float]] = []
    _walk(doc, (), paths)
    if not paths or rng.random() < 0.05:
        doc, how = _random_json(rng, canary), "root-replaced"
    else:
        path = rng.choices([p for p, _ in paths], weights=[w for _, w in paths])[0]
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        key = path[-1]
        label = str(key) if isinstance(key, str) else "[]"
        what = rng.randrange(7)
        if what <= 2:
            parent[key] = _random_json(rng, canary)
            how = f"value:{label}"
        elif what == 3:
            if isinstance(parent, dict):
                del parent[key]
            else:
                parent.pop(key)
            how = f"delete:{label}"
        elif what == 4 and isinstance(parent, dict):
            parent[hostile_string(rng, canary) if rng.random() < 0.5 else key + "_"] = parent.pop(key)
            how = f"rename-key:{label}"
        elif what == 5:
            parent[key] = [parent[key]] if rng.random() < 0.5 else {"x": parent[key]}
            how = f"wrap:{label}"
        else:
            v = parent[key]
            if isinstance(v, list) and v:
                parent[key] = v * rng.choice([2, 100, 10_000]) if len(v) < 100 else v[::-1]
                how = f"repeat:{label}"
            elif isinstance(v, str):
                parent[key] = rng.choice([v + v, v[: len(v) // 2], v.upper(), hostile_string(rng, canary)])
                how = f"string:{label}"
            elif isinstance(v, int) and not isinstance(v, bool):
                parent[key] = rng.choice([edge_int(rng), -v, v + 1, str(v), float(v)])
                how = f"int:{label}"
            else:
                parent[key] = _NEST
                how = f"nest:{label}"
    text = json.dumps(doc)
    depth = rng.choice([50, 1000, 100_000])
    return text.replace(json.dumps(_NEST), "[" * depth + "]" * depth), how


#: Allow-listed targets of other signatures than the node they replace (builtins, higher-order ops, ops).
_SWAP_TARGETS = ("_operator.add", "_operator.neg", "_operator.getitem", "_operator.not_", "math.sqrt",
                 "torch.sym_max", "torch.sym_ite", "torch.sym_sum", "torch.ops.higher_order.cond",
                 "torch.ops.higher_order.map_impl", "torch.ops.higher_order.while_loop",
                 "torch.ops.aten.relu.default", "torch.ops.aten.addmm.default", "torch.ops.aten.cat.default",
                 "executorch.exir.dialects.edge.ops.aten.relu.default",
                 "executorch.exir.dialects.edge.ops.aten.convolution.default")


def _program_places(doc: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """Every dict in ``doc`` (subgraphs included) that has ``key``."""
    found: list[dict[str, Any]] = []
    stack: list[Any] = [doc]
    while stack:
        cur = stack.pop()
        if isinstance(cur, dict):
            if key in cur:
                found.append(cur)
            stack.extend(cur.values())
        elif isinstance(cur, list):
            stack.extend(cur)
    return found


def mutate_program(doc: dict[str, Any], rng: random.Random) -> tuple[str, str]:
    """A structured change to a serialized program that keeps the JSON well-formed: a tensor meta whose
    sizes overflow in their product, or a node's target swapped for an allow-listed op of another signature."""
    if rng.random() < 0.5:
        metas = [m for m in _program_places(doc, "sizes") if isinstance(m.get("sizes"), list)]
        if metas:
            meta = rng.choice(metas)
            dims = rng.choice([[1 << 31, 1 << 31], [1 << 39, 1 << 39], [1 << 21] * 3, [(1 << 40) - 1, 1 << 30, 2]])
            meta["sizes"] = [{"as_int": d} for d in dims]
            if isinstance(meta.get("strides"), list):
                meta["strides"] = [{"as_int": 1} for _ in dims]
            return json.dumps(doc), "program.sizes-overflow"
    nodes = [n for n in _program_places(doc, "target") if isinstance(n.get("target"), str) and "inputs" in n]
    if not nodes:
        return json.dumps(doc), "program.unchanged"
    node = rng.choice(nodes)
    node["target"] = rng.choice(_SWAP_TARGETS)
    return json.dumps(doc), "program.target-swap"


_MAPS = ("debug_handle_map", "delegate_map", "instruction_id_to_num_outs_map")


def _map_value(entry: str, rng: random.Random, canary: str) -> Any:
    """A plausible-looking but hostile value for one instruction of a small map entry."""
    if entry == "instruction_id_to_num_outs_map":
        return rng.choice([edge_int(rng), -1, 0, 2**63, 2**64 + 1, "3", 1.5, None, [1], {"n": 1}])
    if entry == "debug_handle_map":
        return rng.choice([edge_int(rng), -1, [edge_int(rng)], [], [[1]], list(range(rng.choice([2, 10_000]))),
                           "1", None, {"1": 2}])
    inner: Any = rng.choice([{}, {"1": [edge_int(rng)]}, {"x": "y"}, [], None, {"1": {"1": 1}}])
    return rng.choice([{"name": hostile_string(rng, canary), "delegate_map": inner}, {"name": "XnnpackBackend"},
                       {"delegate_map": inner}, [], "XnnpackBackend", {"name": None, "delegate_map": inner}])


def mutate_map(entry: str, doc: Any, rng: random.Random, canary: str) -> tuple[str, str]:
    """Add or change instructions in debug_handle_map / delegate_map / instruction_id_to_num_outs_map."""
    if not isinstance(doc, dict) or not doc:
        doc = {"forward": {}}
    method = rng.choice(list(doc) + [hostile_string(rng, canary)])
    table = doc.get(method)
    if not isinstance(table, dict):
        table = doc[method] = {}
    for _ in range(rng.choice([1, 1, 3, 2000])):
        key = rng.choice([str(rng.randrange(64)), str(edge_int(rng)), "-1", "x", "", "1e3", " 1", "0x1"])
        table[key] = _map_value(entry, rng, canary)
    return json.dumps(doc), f"map.{method if len(method) < 20 else 'method'}"


def _evil_pickle(canary: str) -> bytes:
    # protocol-0 pickle that would call os.system if loaded without weights_only
    return b"cos\nsystem\n(S'touch " + canary.encode() + b"'\ntR."


def _mutate_pickled(data: bytes, rng: random.Random, canary: str) -> tuple[bytes, str]:
    try:
        inner = read_entries(data)
    except Exception:  # noqa: BLE001 - already mangled: mutate raw
        inner = []
    u = rng.random()
    if inner and u < 0.3:
        pkl = [i for i, e in enumerate(inner) if e.name.endswith(b"data.pkl")]
        i = rng.choice(pkl or range(len(inner)))
        if rng.random() < 0.3 and pkl:
            inner[i] = inner[i].with_(data=_evil_pickle(canary), crc=None, size=None)
            return write_zip(inner), "pickle.evil-global"
        new, how = byte_mutation(inner[i].data, rng)
        inner[i] = inner[i].with_(data=new, crc=None, size=None)
        return write_zip(inner), f"pickle.inner-{how}"
    if inner and u < 0.5:
        return _zip_level(inner, data, rng, canary, nested=True)
    new, how = byte_mutation(data, rng)
    return new, f"pickle.raw-{how}"


def _zip_level(entries: list[Entry], raw: bytes, rng: random.Random, canary: str,
               nested: bool = False) -> tuple[bytes, str]:
    prefix = "inner-zip" if nested else "zip"
    i = rng.randrange(len(entries))
    what = rng.randrange(10)
    if what == 0:
        return raw[: rng.randrange(len(raw))], f"{prefix}.truncate"
    if what == 1:
        name = rng.choice([b"\xff\xfe\x80name", b"../../" + entries[i].name, b"", entries[0].name,
                           hostile_string(rng, canary).encode("utf-8", "replace")[:300], entries[i].name.upper()])
        flags = 0x800 if rng.random() < 0.7 else 0
        entries[i] = entries[i].with_(name=name, flags=flags)
        return write_zip(entries), f"{prefix}.entry-name"
    if what == 2:
        method = rng.choice([1, 6, 8, 9, 12, 14, 19, 93, 95, 98, 99, 0xFFFF])
        return write_zip(entries, central_overrides={i: {"method": method}}, local_overrides={i: {"method": method}}), \
            f"{prefix}.compression-method"
    if what == 3:
        field = rng.choice(["csize", "usize"])
        value = edge_int(rng, 32, signed=False)
        target = rng.choice(["central", "local", "both"])
        c = {i: {field: value}} if target != "local" else {}
        loc = {i: {field: value}} if target != "central" else {}
        return write_zip(entries, central_overrides=c, local_overrides=loc), f"{prefix}.size-{field}"
    if what == 4:
        return write_zip(entries, central_overrides={i: {"crc": rng.getrandbits(32)}}), f"{prefix}.crc"
    if what == 5:
        field = rng.choice(["offset", "nlen", "xlen", "flags"])
        return write_zip(entries, central_overrides={i: {field: edge_int(rng, 16 if field != "offset" else 32,
                                                                         signed=False)}}), f"{prefix}.cd-{field}"
    if what == 6:
        field = rng.choice(["count", "cd_size", "cd_offset", "clen"])
        return write_zip(entries, eocd_overrides={field: edge_int(rng, 16, signed=False)}), f"{prefix}.eocd-{field}"
    if what == 7:
        how = rng.choice(["drop", "dup", "many"])
        if how == "drop":
            del entries[i]
        elif how == "dup":
            entries.insert(i, entries[i])
        else:
            entries += [entries[i].with_(name=entries[i].name + str(k).encode()) for k in range(2000)]
        return write_zip(entries), f"{prefix}.entries-{how}"
    if what == 8:
        size = rng.choice(BOMB_SIZES)
        stream, crc = deflate_bomb(size, b"[" if size == BOMB_SIZES[0] and rng.random() < 0.5 else b" ")
        entries[i] = entries[i].with_(data=stream, method=8, crc=crc, size=size)
        return write_zip(entries), f"{prefix}.bomb-{size >> 20}MiB"
    new, how = byte_mutation(raw, rng)
    return new, f"{prefix}.raw-{how}"


def mutate_etrecord(raw: bytes, rng: random.Random, canary: str) -> tuple[bytes, str]:
    """One mutation of an ETRecord (zip level 35%, JSON entries 45%, pickled entries 20%)."""
    entries = read_entries(raw)
    u = rng.random()
    if u < 0.35:
        return _zip_level(entries, raw, rng, canary)
    jsons, pickled = [], []
    for i, e in enumerate(entries):
        if e.method != 0:
            continue
        if e.data.startswith(b"PK\x03\x04"):
            pickled.append(i)
        elif e.data[:1] in (b"{", b"["):
            jsons.append(i)
    if u < 0.8 and jsons:
        # the serialized programs are where most of the checking lives; favour them
        weights = [5.0 if len(entries[i].data) > 1000 else 1.0 for i in jsons]
        i = rng.choices(jsons, weights=weights)[0]
        name = entries[i].name.decode(errors="replace")
        doc = json.loads(entries[i].data)
        if name in _MAPS and rng.random() < 0.6:
            text, how = mutate_map(name, doc, rng, canary)
        elif isinstance(doc, dict) and "graph_module" in doc and rng.random() < 0.3:
            text, how = mutate_program(doc, rng)
        else:
            text, how = mutate_json(doc, rng, canary)
        entries[i] = entries[i].with_(data=text.encode("utf-8", "surrogatepass"), crc=None, size=None)
        return write_zip(entries), f"json[{entries[i].name.decode(errors='replace')}].{how}"
    if pickled:
        i = rng.choice(pickled)
        data, how = _mutate_pickled(entries[i].data, rng, canary)
        entries[i] = entries[i].with_(data=data, crc=None, size=None)
        return write_zip(entries), f"{how}[{entries[i].name.decode(errors='replace')}]"
    return _zip_level(entries, raw, rng, canary)
