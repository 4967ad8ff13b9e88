"""Record the reference's answers for alignment, comparators and compare_results.

Run with the oracle python (it imports ExecuTorch; numdiff never does)::

    /root/.cache/numdiff-oracle/bin/python scripts/record_align_oracle.py

It writes ``tests/data/align_oracle.json``: hand-built and seeded-random cases with the
reference's exact answers (or the exception type it raised). ``tests/align/test_pairing.py`` and
``tests/comparators/`` replay the cases against numdiff without the oracle. Never edit the JSON
by hand; re-run this script.
"""

# The `attempt(lambda: ...)` calls run their lambda immediately, so loop variables are bound.
# ruff: noqa: B023

from __future__ import annotations

import json
import math
import random
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
from executorch.devtools.inspector import _inspector_utils as utils
from executorch.devtools.inspector._inspector import Inspector
from executorch.devtools.inspector.numerical_comparator import (
    L1Comparator,
    MSEComparator,
    SNRComparator,
)

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "align_oracle.json"
REAL_OUT = ROOT / "tests" / "data" / "align_real.pt"
#: Real fixtures whose reference-side alignment inputs and answers are recorded (tests/fixtures/<name>).
REAL_FIXTURES = ("attention_view", "cnn_nested", "multi_output", "pt2e_quant", "xnnpack", "many_runs")
DTYPES = {
    "float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
    "bfloat16": torch.bfloat16, "int8": torch.int8, "uint8": torch.uint8,
    "int32": torch.int32, "int64": torch.int64, "bool": torch.bool,
}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}


def _float(x: float) -> Any:
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return {"float": repr(x)}
    return x


def enc(value: Any) -> Any:
    """Encode a value as JSON (tensors by dtype, shape and flat data)."""
    if isinstance(value, torch.Tensor):
        flat = value.detach().reshape(-1)
        if value.dtype in (torch.float16, torch.bfloat16):
            flat = flat.float()
        return {"tensor": {"dtype": DTYPE_NAMES[value.dtype], "shape": list(value.shape),
                           "data": [_float(x) for x in flat.tolist()]}}
    if isinstance(value, tuple):
        return {"tuple": [enc(v) for v in value]}
    if isinstance(value, list):
        return {"list": [enc(v) for v in value]}
    if isinstance(value, float):
        return _float(value)
    return value


def dec(value: Any) -> Any:
    """Inverse of :func:`enc`."""
    if isinstance(value, dict):
        if "tensor" in value:
            t = value["tensor"]
            data = [dec(x) for x in t["data"]]
            dtype = DTYPES[t["dtype"]]
            work = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
            return torch.tensor(data, dtype=work).to(dtype).reshape(t["shape"])
        if "tuple" in value:
            return tuple(dec(v) for v in value["tuple"])
        if "list" in value:
            return [dec(v) for v in value["list"]]
        if "float" in value:
            return float(value["float"])
    return value


def attempt(fn: Any) -> dict[str, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return {"result": fn()}
        except Exception as e:  # noqa: BLE001 - recording whatever the reference raises
            return {"raises": type(e).__name__, "message": str(e)[:200]}


def T(*shape: int, dtype: torch.dtype = torch.float32, gen: torch.Generator) -> torch.Tensor:
    if dtype.is_floating_point:
        return (torch.randn(*shape, generator=gen) * 3).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    low, high = (0, 255) if dtype == torch.uint8 else (-128, 127)
    return torch.randint(low, high, shape, generator=gen).to(dtype)


# --------------------------------------------------------------------------- merge
def merge_cases(rng: random.Random) -> list[dict[str, Any]]:
    cases = [
        [((1, 2, 3), 1), ((2, 3, 4, 5), 2), ((6, 7, 8), 3), ((10, 11), 4), ((11, 12), 5)],
        [((1, 10), 1), ((2, 5), 2), ((1, 7, 9), 3), ((11, 13), 4), ((11, 15), 5)],
        [((9,), 1), ((9, 9, 9), 2), ((9, 9), 3)],
        [((1,), 10), ((2,), 5), ((1, 2), 3)],  # absorbs two newer handles at once
        [((1, 1, 2), 1), ((3, 2), 2)],
        [],
    ]
    for _ in range(40):
        n = rng.randint(1, 7)
        ids = rng.sample(range(1, 30), n)
        cases.append([(tuple(rng.choices(range(12), k=rng.randint(1, 3))), ids[i]) for i in range(n)])
    out = []
    for case in cases:
        # values are labels; the reference carries them through untouched
        given = {h: (i, f"v{k}", 1 + k % 2) for k, (h, i) in enumerate(case)}
        given_list = [[list(h), v[0], v[1], v[2]] for h, v in given.items()]
        r = attempt(lambda: [[list(h), *v] for h, v in utils.merge_runtime_overlapping_debug_handles(given).items()])
        out.append({"input": given_list, **r})
    return out


# --------------------------------------------------------------------------- map
def map_cases(rng: random.Random, gen: torch.Generator) -> list[dict[str, Any]]:
    t = lambda *s, dtype=torch.float32: T(*s, dtype=dtype, gen=gen)
    a1, a2, a3 = t(3), t(2), t(2, 2)
    cases: list[tuple[str, dict, dict]] = [
        ("empty", {}, {}),
        ("single_element", {(0,): 100, (1,): 200, (2,): 300}, {(0,): (150, 1), (1,): (250, 1), (2,): (350, 1)}),
        ("no_overlap", {(0,): 100, (4,): 300}, {(2, 3): (200, 1), (8, 9): (300, 1)}),
        ("partial", {(2,): 100, (9,): 300}, {(2, 3): (200, 1), (8, 9): (300, 1)}),
        ("many_aot_one_runtime", {(0,): 100, (1,): 200, (2,): 300, (3,): 400}, {(2, 3, 1): (250, 1), (8, 9): (300, 1)}),
        ("delegated_two_outputs", {(1,): t(3), (2,): t(2), (3,): t(3), (4,): t(3)},
         {(1, 2): ([t(3), t(2)], 2), (3, 4): ([t(3), t(3)], 2)}),
        ("sole_list", {(0,): a1}, {(0,): ([t(3)], 1)}),
        ("delegate_inputs_and_output_shape", {(5,): t(2, 2)}, {(4, 5): ([t(4), t(2, 2)], 1)}),
        ("delegate_inputs_and_output_fallback", {(5,): t(2, 2)}, {(4, 5): ([t(2, 2), t(2, 2)], 1)}),
        ("delegate_no_shape_match", {(5,): t(2, 2)}, {(4, 5): ([t(4), t(3)], 1)}),
        ("dtype_disambiguates", {(7,): t(2, 3)}, {(7,): ([t(2, 3, dtype=torch.bool), t(2, 3)], 1)}),
        ("input_picked_when_output_shape_differs", {(5,): t(1, 8, 32)}, {(5,): ([t(1, 8, 32), t(1, 8, 2, 16)], 1)}),
        ("aot_sequence_len1", {(3,): [a2]}, {(3,): ([t(2)], 1)}),
        ("aot_sequence_len2", {(3,): (a3, t(2, 2, dtype=torch.int64))}, {(3,): ([t(2, 2), t(2, 2, dtype=torch.int64)], 1)}),
        ("aot_sequence_runtime_list_of_lists", {(3,): [a2]}, {(3,): ([[t(2)]], 1)}),
        ("aot_sequence_runtime_scalar", {(3,): [a2]}, {(3,): (t(2), 1)}),
        ("too_few_handles", {(5,): t(2)}, {(5,): ([t(2), t(2)], 2)}),
        ("two_runtime_one_group", {(1, 2): t(2)}, {(1,): ([t(2)], 1), (2,): ([t(2)], 1)}),
        ("aot_not_subset", {(7, 1): t(2), (2,): t(2)}, {(1, 2): ([t(2)], 1)}),
        ("none_output", {(0,): None}, {(0,): (None, 1)}),
        ("scalar_aot", {(0,): 3}, {(0,): ([t(1)], 1)}),
    ]
    shapes = [(2,), (3,), (2, 2), (4,)]
    for k in range(30):
        n_aot = rng.randint(1, 8)
        aot = {(i,): t(*rng.choice(shapes)) for i in range(n_aot)}
        ids = list(range(n_aot + 2))
        rng.shuffle(ids)
        runtime: dict = {}
        while ids:
            size = rng.randint(1, 3)
            handle, ids = tuple(ids[:size]), ids[size:]
            num = 2 if size >= 2 and rng.random() < 0.3 else 1
            data = [t(*rng.choice(shapes)) for _ in range(rng.randint(num, 3))]
            runtime[handle] = (data, num)
        cases.append((f"random_{k}", aot, runtime))
    out = []
    for name, aot, runtime in cases:
        r = attempt(lambda: [[list(ak[0]), enc(ak[1]), list(rv[0]), enc(rv[1])]
                             for ak, rv in utils.map_runtime_aot_intermediate_outputs(aot, runtime).items()])
        out.append({
            "name": name,
            "aot": [[list(h), enc(v)] for h, v in aot.items()],
            "runtime": [[list(h), enc(d), n] for h, (d, n) in runtime.items()],
            **r,
        })
    return out


# --------------------------------------------------------------------------- collect
def collect_cases(gen: torch.Generator) -> list[dict[str, Any]]:
    t = lambda *s: T(*s, gen=gen)

    def ev(name: str, handles: Any, iid: int, data: Any, op_types: list[str] | None = None,
           num_outputs: int = 1, delegated: bool = False, backend: str | None = None) -> dict[str, Any]:
        return {"name": name, "op_types": ["op"] if op_types is None else op_types, "debug_handles": handles,
                "_instruction_id": iid, "debug_data": data, "num_outputs": num_outputs,
                "is_delegated_op": delegated, "delegate_backend_name": backend}

    cases = {
        "basic": [
            ev("OPERATOR_CALL", 0, 0, [t(2)]), ev("op_0", 1, 1, [t(2)], op_types=[]),
            ev("op_2", 4, 4, [t(3)]), ev("op_3", 4, 5, [t(3)]),
            ev("op_4", 5, 6, [t(2)]), ev("op_5", [6, 7], 7, [t(2)]), ev("op_6", (7, 8), 8, [t(2)]),
        ],
        "smaller_id_later": [ev("a", 3, 9, [t(2)]), ev("b", 3, 2, [t(2)])],
        "delegate_call_and_inner": [
            ev("DELEGATE_CALL", [1, 2, 3], 4, [t(2), t(2)], delegated=False, backend="XnnpackBackend"),
            ev("inner_add", 2, 4, [t(2)], delegated=True, backend="XnnpackBackend"),
            ev("DELEGATE_CALL", [7, 8], 6, [t(2), t(3)], backend="Other"),
        ],
        "delegate_inner_without_data": [
            ev("DELEGATE_CALL", [1, 2], 4, [t(2), t(2)], backend="XnnpackBackend"),
            ev("inner", 2, 4, [], delegated=True, backend="XnnpackBackend"),
        ],
        "two_runs": [ev("a", 1, 1, [t(2)]), ev("b", [1, 2], 2, [t(2)]), ev("a", 1, 1, [t(2)]), ev("b", [1, 2], 2, [t(2)])],
    }
    out = []
    for name, events in cases.items():
        objs = [SimpleNamespace(**{k: v for k, v in e.items()}) for e in events]
        fake = SimpleNamespace(event_blocks=[SimpleNamespace(events=objs)])

        def run() -> Any:
            outputs, names = Inspector._get_runtime_intermediate_outputs_and_op_names(fake)
            return {"outputs": [[list(h), enc(d), n] for h, (d, n) in outputs.items()],
                    "op_names": [[list(h), v] for h, v in names.items()]}

        out.append({"name": name, "events": [{**e, "debug_data": enc(e["debug_data"])} for e in events], **attempt(run)})
    return out


# --------------------------------------------------------------------------- comparators
def element_cases(gen: torch.Generator) -> list[dict[str, Any]]:
    nan, inf = float("nan"), float("inf")
    pairs: list[tuple[Any, Any]] = [
        (torch.tensor([[1, 2], [3, 4]]), torch.tensor([[1, 2], [3, 4]])),
        (1, 2), (2.5, 2.5), (0, 0),
        (torch.tensor([3.0, 2, -1, nan]), torch.tensor([nan, 0, -3, 1])),
        (torch.tensor([nan, 1.0]), torch.tensor([0.0, 1.0])),
        (torch.tensor([1.0, inf]), torch.tensor([1.0, inf])),
        (torch.tensor([1.0, inf, nan]), torch.tensor([1.0, 2.0, 0.0])),
        (torch.tensor([1.0, -inf]), torch.tensor([1.0, 5.0])),
        (torch.zeros(3), torch.zeros(3)), (torch.zeros(3), torch.ones(3)), (torch.ones(3), torch.zeros(3)),
        (torch.tensor([0, 2, -1]), torch.tensor([1, 0, -3, 4])),
        (torch.tensor([[4, 9], [6, 4]]), torch.tensor([[1, 2], [3, 5]])),
        (torch.tensor([1.0, 2.0, 3.0]), torch.tensor([[1.0, 2.0, 4.0]])),
        (torch.empty(0), torch.empty(0)),
    ]
    for dtype in DTYPES.values():
        pairs.append((T(3, 4, dtype=dtype, gen=gen), T(3, 4, dtype=dtype, gen=gen)))
        pairs.append((T(5, dtype=dtype, gen=gen), T(5, dtype=dtype, gen=gen)))
    out = []
    for a, b in pairs:
        row: dict[str, Any] = {"a": enc(a), "b": enc(b)}
        for cname, comp in (("l1", L1Comparator()), ("mse", MSEComparator()), ("snr", SNRComparator())):
            row[cname] = attempt(lambda: _float(comp.element_compare(a, b)))
        out.append(row)
    return out


def compare_cases(gen: torch.Generator) -> list[dict[str, Any]]:
    t = lambda *s: T(*s, gen=gen)
    x = t(2, 2)
    mappings = [
        ("basic", {((0,), t(3)): ((0,), t(3)), ((1, 2), t(2)): ((1, 2), t(2))}),
        ("none_skipped", {((0,), None): ((0,), t(3)), ((1,), t(3)): ((1,), None), ((2,), t(2)): ((2,), t(2))}),
        ("sequence_len2_skipped", {((3,), (x, x)): ((3,), (x, x)), ((4,), t(2)): ((4,), t(2))}),
        ("sequence_len1", {((3,), (t(2),)): ((3,), (t(2),))}),
        ("sequence_len1_vs_2", {((3,), (t(2),)): ((3,), (t(2), t(2)))}),
        ("reshape", {((5,), t(1, 8, 32)): ((5,), t(1, 8, 2, 16))}),
        ("broadcast_same_numel", {((5,), t(3)): ((5,), t(1, 3))}),
        ("identical", {((6,), x): ((6,), x.clone())}),
    ]
    aot_names = {(0,): ["conv"], (1,): ["add"], (2,): ["mul"], (3,): ["split"], (4,): ["relu"], (5,): ["view"], (6,): ["x"]}
    rt_names = {(0,): ["native_call_conv"], (1, 2): ["DELEGATE_CALL"], (3,): ["split"], (4,): ["relu"], (5,): ["clone"]}
    out = []
    for name, mapping in mappings:
        entry: dict[str, Any] = {
            "name": name,
            "mapping": [[list(k[0]), enc(k[1]), list(v[0]), enc(v[1])] for k, v in mapping.items()],
            "aot_names": [[list(h), v] for h, v in aot_names.items()],
            "runtime_names": [[list(h), v] for h, v in rt_names.items()],
        }
        for cname, comp in (("l1", L1Comparator()), ("mse", MSEComparator()), ("snr", SNRComparator())):
            def run() -> Any:
                df = comp.compare(mapping, aot_names, rt_names)
                return {"columns": list(df.columns), "rows": [
                    {"aot_debug_handle": list(r["aot_debug_handle"]), "aot_ops": r["aot_ops"],
                     "runtime_ops": r["runtime_ops"], "runtime_debug_handle": list(r["runtime_debug_handle"]),
                     "gap": [_float(g) for g in r["gap"]]} for _, r in df.iterrows()]}
            entry[cname] = attempt(run)
        out.append(entry)
    return out


def program_output_cases(gen: torch.Generator) -> list[dict[str, Any]]:
    cases = []
    for dtype in DTYPES.values():
        if dtype == torch.bool:
            continue
        a = T(4, 4, dtype=dtype, gen=gen)
        b = a.clone()
        b[0, 0] += 1
        b[1, 3] -= 1
        cases.append(([a, T(3, dtype=dtype, gen=gen)], [b, T(3, dtype=dtype, gen=gen)]))
    cases.append(([torch.zeros(3), torch.ones(2)], [torch.zeros(3), torch.ones(2)]))
    cases.append(([torch.tensor([1.0, float("nan")]), 3], [torch.tensor([1.0, 2.0]), 3]))
    out = []
    for ref, run in cases:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = {
                "snr": utils.calculate_snr(ref, run),
                "mse": utils.calculate_mse(ref, run),
                "cosine_similarity": utils.calculate_cosine_similarity(ref, run),
            }
        out.append({"reference": [enc(v) for v in ref], "run": [enc(v) for v in run],
                    "result": {k: [_float(x) if x is not None else None for x in v] for k, v in res.items()}})
    return out


def float_conversion_cases() -> list[dict[str, Any]]:
    nan, inf = float("nan"), float("inf")
    values = [torch.tensor([1.0, nan, inf, -inf]), torch.tensor([1.0, inf]), 5, 2.5,
              torch.tensor([1, 2], dtype=torch.int8), torch.tensor([nan], dtype=torch.float16)]
    return [{"input": enc(v), **attempt(lambda: enc(utils.convert_to_float_tensor(v)))} for v in values]


# --------------------------------------------------------------------------- real fixtures
def real_cases() -> dict[str, Any]:
    """The reference's alignment inputs and answers on real artifacts (tests/fixtures).

    Per fixture: the events' alignment fields, the AOT intermediate outputs and op names of the
    default reference graph, the reference's mapping (as indices into the AOT outputs and runtime
    values), and each metric's gap rows or the exception the reference raised.
    """
    from executorch.devtools import Inspector as RefInspector

    out: dict[str, Any] = {}
    for name in REAL_FIXTURES:
        folder = ROOT / "tests" / "fixtures" / name
        kwargs: dict[str, Any] = {"etdump_path": str(folder / "etdump.etdp"), "etrecord": str(folder / "etrecord.bin")}
        if (folder / "debug_buffer.bin").exists():
            kwargs["debug_buffer_path"] = str(folder / "debug_buffer.bin")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ins = RefInspector(**kwargs)
            events = [
                {"name": e.name, "op_types": list(e.op_types or []), "debug_handles": e.debug_handles,
                 "_instruction_id": e._instruction_id, "debug_data": list(e.debug_data or []),
                 "num_outputs": e.num_outputs, "is_delegated_op": e.is_delegated_op,
                 "delegate_backend_name": e.delegate_backend_name}
                for block in ins.event_blocks for e in block.events
            ]
            graph, _ = ins._resolve_reference_graph(None, False)
            aot, aot_names = ins._get_aot_intermediate_outputs_and_op_names(graph)
            runtime, runtime_names = ins._get_runtime_intermediate_outputs_and_op_names()
            gaps: dict[str, Any] = {}
            for metric in ("L1", "MSE", "SNR"):
                try:
                    df = ins.calculate_numeric_gap(metric)
                    gaps[metric] = {"rows": [
                        (tuple(r["aot_debug_handle"]), list(r["aot_ops"]), list(r["runtime_ops"]),
                         tuple(r["runtime_debug_handle"]), [float(g) for g in r["gap"]])
                        for _, r in df.iterrows()]}
                except Exception as e:  # noqa: BLE001
                    gaps[metric] = {"raises": type(e).__name__}
            try:
                mapping = utils.map_runtime_aot_intermediate_outputs(aot, runtime)
                mapped = [(k[0], v[0]) for k, v in mapping.items()]
            except Exception as e:  # noqa: BLE001
                mapped = type(e).__name__
        out[name] = {
            "events": events,
            "aot": {h: v for h, v in aot.items()},
            "aot_names": aot_names,
            "runtime_keys": list(runtime),
            "runtime_names": runtime_names,
            "mapping_handles": mapped,
            "gaps": gaps,
        }
    return out


def main() -> int:
    rng = random.Random(1234)
    gen = torch.Generator().manual_seed(1234)
    data = {
        "generated_by": "scripts/record_align_oracle.py (ExecuTorch 1.5.1, torch " + torch.__version__ + ")",
        "merge": merge_cases(rng),
        "map": map_cases(rng, gen),
        "collect": collect_cases(gen),
        "element_compare": element_cases(gen),
        "compare": compare_cases(gen),
        "program_outputs": program_output_cases(gen),
        "convert_to_float_tensor": float_conversion_cases(),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(data) + "\n")
    print(f"wrote {OUT}", file=sys.stderr)
    torch.save(real_cases(), REAL_OUT)
    print(f"wrote {REAL_OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
