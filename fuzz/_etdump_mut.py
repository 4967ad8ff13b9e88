"""Schema-aware ETDump mutations: parse with numdiff.schema, change one field, write back with etdump_writer.

Every mutation edits the typed records (``ETDumpDoc``) and re-serializes them, so the result is a
well-formed FlatBuffer whose *content* lies: counts, offsets, sizes, scalar types, strings, union
members, debug handles and instruction ids, with huge and negative values.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from fuzz._values import edge_int, hostile_string
from numdiff.schema.etdump import (
    AllocationEvent,
    DebugEvent,
    ETDumpDoc,
    Event,
    ProfileEvent,
    RunDoc,
    Tensor,
    Value,
    ValueType,
)

__all__ = ["doc_tensors", "mutate_doc", "mutate_tensor_against_buffer"]


def _runs(doc: ETDumpDoc) -> list[RunDoc]:
    return [replace(r, events=list(r.events or ())) for r in doc.run_data]


def _pick_event(runs: list[RunDoc], rng: random.Random) -> tuple[int, int] | None:
    candidates = [i for i, r in enumerate(runs) if r.events]
    if not candidates:
        return None
    ri = rng.choice(candidates)
    return ri, rng.randrange(len(runs[ri].events or ()))


def doc_tensors(doc: ETDumpDoc) -> list[tuple[int, int, int | None]]:
    """(run, event, list index or None) of every tensor a debug event logs."""
    out: list[tuple[int, int, int | None]] = []
    for ri, r in enumerate(doc.run_data):
        for ei, e in enumerate(r.events or ()):
            v = None if e.debug_event is None else e.debug_event.debug_entry
            if v is None:
                continue
            if v.tensor is not None:
                out.append((ri, ei, None))
            for li in range(len(v.tensor_list or ())):
                out.append((ri, ei, li))
    return out


def _get_tensor(doc: ETDumpDoc, where: tuple[int, int, int | None]) -> Tensor:
    v = doc.run_data[where[0]].events[where[1]].debug_event.debug_entry  # type: ignore[index,union-attr]
    assert v is not None
    return v.tensor if where[2] is None else v.tensor_list[where[2]]  # type: ignore[index,return-value]


def _set_tensor(runs: list[RunDoc], where: tuple[int, int, int | None], t: Tensor) -> None:
    ri, ei, li = where
    e = runs[ri].events[ei]  # type: ignore[index]
    de = e.debug_event
    assert de is not None and de.debug_entry is not None
    v = de.debug_entry
    if li is None:
        v = replace(v, tensor=t)
    else:
        members = list(v.tensor_list or ())
        members[li] = t
        v = replace(v, tensor_list=tuple(members))
    runs[ri].events[ei] = replace(e, debug_event=replace(de, debug_entry=v))  # type: ignore[index]


def _mutate_tensor(t: Tensor, rng: random.Random) -> tuple[Tensor, str]:
    what = rng.randrange(6)
    if what == 0:
        return replace(t, scalar_type=rng.randrange(-128, 128)), "tensor.scalar_type"
    if what == 1:
        return replace(t, offset=edge_int(rng)), "tensor.offset"
    if what == 2 and t.sizes:
        sizes = list(t.sizes)
        sizes[rng.randrange(len(sizes))] = edge_int(rng)
        return replace(t, sizes=tuple(sizes)), "tensor.sizes"
    if what == 3 and t.strides:
        strides = list(t.strides)
        strides[rng.randrange(len(strides))] = rng.choice([0, -1, edge_int(rng)])
        return replace(t, strides=tuple(strides)), "tensor.strides"
    if what == 4:
        n = rng.choice([0, 1, 8, 64, 1000])
        return replace(t, sizes=tuple(rng.choice([1, 2, 0]) for _ in range(n)),
                       strides=tuple(rng.choice([1, 0]) for _ in range(rng.choice([n, 0, n + 1])))), "tensor.ndim"
    return replace(t, strides=t.strides[:-1] if t.strides else (1, 1)), "tensor.rank-mismatch"


def _mutate_value(v: Value, rng: random.Random, canary: str) -> tuple[Value, str]:
    what = rng.randrange(7)
    if what == 0:
        return replace(v, val=rng.choice(list(ValueType))), "value.union-type"
    if what == 1 and v.tensor is not None:
        t, how = _mutate_tensor(v.tensor, rng)
        return replace(v, tensor=t), how
    if what == 2:
        members = list(v.tensor_list or ((v.tensor,) if v.tensor else ()))
        if members:
            return replace(v, val=ValueType.TENSOR_LIST, tensor_list=tuple(members * rng.choice([0, 2, 500]))), \
                "value.tensor_list-count"
    if what == 3:
        return replace(v, int_value=edge_int(rng), val=rng.choice([ValueType.INT, v.val])), "value.int"
    if what == 4:
        return replace(v, float_value=rng.choice([float("nan"), float("inf"), -0.0, 3.4e38]),
                       double_value=rng.choice([float("nan"), -float("inf"), 1e308]),
                       val=rng.choice([ValueType.FLOAT, ValueType.DOUBLE])), "value.float"
    if what == 5:
        return replace(v, string_value=hostile_string(rng, canary), val=ValueType.STRING), "value.string"
    return replace(v, output=rng.choice([None, True, False])), "value.output-flag"


def _mutate_event(e: Event, rng: random.Random, canary: str) -> tuple[Event, str]:
    pe, de, ae = e.profile_event, e.debug_event, e.allocation_event
    u = rng.random()
    if u < 0.1:  # union: no member, or several members at once
        if rng.random() < 0.5:
            return Event(), "event.union-empty"
        any_pe = pe or ProfileEvent("x", 0, 0, -1, None, None, 0, 1)
        any_de = de or DebugEvent(0, 0, None, -1, None, None)
        return Event(profile_event=any_pe, debug_event=any_de, allocation_event=ae or AllocationEvent(0, 1)), \
            "event.union-several"
    if pe is not None:
        field = rng.choice(["name", "chain_index", "instruction_id", "delegate_debug_id_int",
                            "delegate_debug_id_str", "delegate_debug_metadata", "start_time", "end_time", "swap"])
        if field == "swap":
            return replace(e, profile_event=replace(pe, start_time=pe.end_time, end_time=pe.start_time)), \
                "profile.times-swapped"
        new: Any
        if field in ("name", "delegate_debug_id_str"):
            new = rng.choice([None, hostile_string(rng, canary)])
        elif field == "delegate_debug_metadata":
            new = rng.choice([None, b"", bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200))),
                              b"VGF" + bytes(rng.randrange(256) for _ in range(40)), b"\xff" * 4096])
        elif field in ("start_time", "end_time"):
            new = edge_int(rng, 64, signed=False)
        else:
            new = edge_int(rng, 32)
        return replace(e, profile_event=replace(pe, **{field: new})), f"profile.{field}"
    if de is not None:
        field = rng.choice(["chain_index", "instruction_id", "delegate_debug_id_int", "delegate_debug_id_str",
                            "name", "debug_entry", "debug_entry", "debug_entry"])
        if field == "debug_entry":
            if de.debug_entry is None or rng.random() < 0.1:
                return replace(e, debug_event=replace(de, debug_entry=None)), "debug.entry-absent"
            v, how = _mutate_value(de.debug_entry, rng, canary)
            return replace(e, debug_event=replace(de, debug_entry=v)), f"debug.{how}"
        if field in ("name", "delegate_debug_id_str"):
            new = rng.choice([None, hostile_string(rng, canary)])
        elif field == "chain_index":
            new = edge_int(rng, 64, signed=False)
        else:
            new = edge_int(rng, 32)
        return replace(e, debug_event=replace(de, **{field: new})), f"debug.{field}"
    if ae is not None:
        return replace(e, allocation_event=AllocationEvent(edge_int(rng, 32), edge_int(rng, 64, signed=False))), \
            "allocation.fields"
    return Event(profile_event=ProfileEvent(None, 0, -1, -1, None, None, 0, 0)), "event.fill-empty"


def mutate_doc(doc: ETDumpDoc, rng: random.Random, canary: str) -> tuple[ETDumpDoc, str]:
    """One schema-level change to ``doc``."""
    runs = _runs(doc)
    u = rng.random()
    if u < 0.08 or not runs:  # counts of runs
        how = rng.choice(["drop", "dup", "many", "none"])
        if how == "drop" and runs:
            del runs[rng.randrange(len(runs))]
        elif how == "dup" and runs:
            runs.insert(rng.randrange(len(runs)), runs[rng.randrange(len(runs))])
        elif how == "many" and runs:
            runs = runs * rng.choice([10, 200])
        else:
            runs = []
        return ETDumpDoc(doc.version, runs), f"runs.{how}"
    if u < 0.16:  # run fields
        ri = rng.randrange(len(runs))
        field = rng.choice(["name", "bundled_input_index", "allocators", "events-absent"])
        if field == "events-absent":
            runs[ri] = replace(runs[ri], events=None)
        elif field == "name":
            runs[ri] = replace(runs[ri], name=rng.choice([None, hostile_string(rng, canary), runs[0].name]))
        elif field == "bundled_input_index":
            runs[ri] = replace(runs[ri], bundled_input_index=edge_int(rng, 32))
        else:
            runs[ri] = replace(runs[ri], allocators=tuple(runs[ri].allocators)[: rng.randrange(2)])
        return ETDumpDoc(doc.version, runs), f"run.{field}"
    if u < 0.2:
        return ETDumpDoc(edge_int(rng, 32, signed=False), runs), "version"
    pick = _pick_event(runs, rng)
    if pick is None:
        return ETDumpDoc(doc.version, runs), "noop-empty"
    ri, ei = pick
    events = runs[ri].events
    assert isinstance(events, list)
    if u < 0.3:  # counts of events
        how = rng.choice(["drop", "dup", "many", "reverse", "shuffle-run"])
        if how == "drop":
            del events[ei]
        elif how == "dup":
            events.insert(ei, events[ei])
        elif how == "many":
            events[ei: ei + 1] = [events[ei]] * rng.choice([100, 5000])
        elif how == "reverse":
            events.reverse()
        else:
            rng.shuffle(events)
        return ETDumpDoc(doc.version, runs), f"events.{how}"
    events[ei], how = _mutate_event(events[ei], rng, canary)
    return ETDumpDoc(doc.version, runs), how


def mutate_tensor_against_buffer(doc: ETDumpDoc, buffer_len: int, rng: random.Random) -> tuple[ETDumpDoc, str]:
    """Point a logged tensor somewhere awkward in a debug buffer of ``buffer_len`` bytes."""
    places = doc_tensors(doc)
    if not places:
        return doc, "no-tensors"
    runs = _runs(doc)
    where = rng.choice(places)
    t = _get_tensor(doc, where)
    how = rng.choice(["offset-near-end", "offset-past-end", "overlap-other", "same-as-other", "stride0-huge",
                      "negative-stride", "size-to-fill", "size-past-end", "offset-unaligned"])
    if how == "offset-near-end":
        t = replace(t, offset=max(0, buffer_len - rng.randrange(1, 64)))
    elif how == "offset-past-end":
        t = replace(t, offset=buffer_len + rng.choice([0, 1, 4096, 1 << 40]))
    elif how in ("overlap-other", "same-as-other"):
        other = _get_tensor(doc, rng.choice(places))
        t = replace(t, offset=other.offset + (0 if how == "same-as-other" else rng.randrange(1, 16)))
    elif how == "stride0-huge":
        t = replace(t, sizes=(1 << rng.choice([20, 31, 40]),) + tuple(t.sizes[1:]),
                    strides=(0,) + tuple(t.strides[1:]))
    elif how == "negative-stride":
        t = replace(t, strides=tuple(-abs(s) - 1 for s in t.strides))
    elif how == "size-to-fill":
        t = replace(t, sizes=(max(1, buffer_len // 4),), strides=(1,), offset=0)
    elif how == "size-past-end":
        t = replace(t, sizes=(buffer_len + 1,) + tuple(t.sizes[1:]))
    else:
        t = replace(t, offset=t.offset + rng.choice([1, 2, 3, 5]))
    _set_tensor(runs, where, t)
    return ETDumpDoc(doc.version, runs), f"tensor-vs-buffer.{how}"
