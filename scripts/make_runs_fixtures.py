"""Write the runs-against-runs fixtures (tests/fixtures/runs_*/) with ExecuTorch 1.5.1.

Dev script, never run by CI (oracle virtualenv)::

    /root/.cache/numdiff-oracle/bin/python scripts/make_runs_fixtures.py [--only NAME]

``runs_mlp``: one program (the fp32 MLP3 of ``_culprit_models``, portable kernels, input (2, 8)) and
three "devices" that run it on the same input, all under the correct model's ETRecord:

* ``base/``: the correct program (the laptop);
* ``kernel/``: a twin whose fc2 weights are + N(0, 0.05) (one kernel computes something else);
* ``scaled/``: a twin whose fc3 weight and bias are x0.5 (outputs 0.5x the base's).

``runs_decode``: runs of the tiny decode model of ``deeper_decode`` (same seed, so the same program
and ETRecord, ``deeper_decode/etrecord.bin``), each generating greedily from the same prompt with its
step inputs saved: ``base/`` (the correct program) and ``flip/`` (a twin whose rotary rows from position
3 on are x3: its token differs from step 3 on). ``deeper_decode`` itself is a third run (rotary rows from
position 4 on x1.5: its tensors part at step 4, its tokens never). ``truth.json`` records every run's
tokens and the first step whose token differs from the base's.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _culprit_models as cm  # noqa: E402
import _deeper_models as dm  # noqa: E402
import _fixture_runtime as rt  # noqa: E402
from make_culprit_fixtures import _planted_nodes  # noqa: E402
from make_deeper_fixtures import _generate  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"
GENERATOR = {"executorch": "1.5.1", "torch": torch.__version__, "script": "scripts/make_runs_fixtures.py"}


def halve_output(model: torch.nn.Module) -> None:
    """Twin plant: fc3's weight and bias x0.5, so the program's output is 0.5x the base's."""
    with torch.no_grad():
        model.fc3.weight.mul_(0.5)  # type: ignore[operator]
        model.fc3.bias.mul_(0.5)  # type: ignore[operator]


def _same_maps(good: rt.Lowered, twin: rt.Lowered, what: str) -> None:
    assert good.etrecord is not None and twin.etrecord is not None
    for attr in ("_debug_handle_map", "_delegate_map"):
        if getattr(good.etrecord, attr) != getattr(twin.etrecord, attr):
            raise RuntimeError(f"{what}: {attr} differs between the model and its twin")


def _outputs(program: bytes, inputs: tuple[Any, ...]) -> list[torch.Tensor]:
    from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer

    return [o.clone() for o in _load_for_executorch_from_buffer(program).run_method("forward", inputs)]


def build_mlp(out_root: Path) -> dict[str, Any]:
    torch.manual_seed(2025)
    model = cm.MLP3().eval()
    example = (torch.randn(2, 8),)
    kernel_twin, scaled_twin = copy.deepcopy(model), copy.deepcopy(model)
    cm.bump_weight("fc2", 0.05)(kernel_twin)
    halve_output(scaled_twin)
    good = rt.export_and_lower(model, example)
    kernel = rt.export_and_lower(kernel_twin, example)
    scaled = rt.export_and_lower(scaled_twin, example)
    _same_maps(good, kernel, "kernel")
    _same_maps(good, scaled, "scaled")
    out_dir = out_root / "runs_mlp"
    out_dir.mkdir(parents=True, exist_ok=True)
    rt.save_etrecord(good, out_dir / "etrecord.bin", example)
    runs = {"base": good, "kernel": kernel, "scaled": scaled}
    ratios, answers = {}, {}
    base_out = _outputs(good.buffer, example)[0]
    for name, lowered in runs.items():
        (out_dir / name).mkdir(exist_ok=True)
        rt.run_with_etdump(lowered.buffer, [example], out_dir / name, debug_buffer=True)
        out = _outputs(lowered.buffer, example)[0]
        ratios[name] = float((out * base_out).sum() / (base_out * base_out).sum())
        answers[name] = float((out.argmax(-1) == base_out.argmax(-1)).double().mean())
    graph = good.etrecord.exported_program.graph  # type: ignore[union-attr]
    truth = {
        "generator": GENERATOR,
        "model": "fp32 MLP3 fc1-relu-fc2-tanh-fc3, portable, input (2, 8); ETRecord of the correct model",
        "runs": {
            "base": {"plant": None, "departs_at": None},
            "kernel": {"plant": "fc2 weights + N(0, 0.05)", "departs_at": _planted_nodes(graph, "fc2")},
            "scaled": {"plant": "fc3 weight and bias x0.5", "departs_at": _planted_nodes(graph, "fc3"),
                       "output_scale": 0.5},
        },
        "output_projection_on_base": ratios,
        "answers_agree_with_base": answers,
    }
    (out_dir / "truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    return truth


def build_decode(out_root: Path) -> dict[str, Any]:
    """Two runs of ``deeper_decode``'s program (same seed, prompt and ETRecord): the correct model, and a twin
    whose rotary rows from position 3 on are x3 (its token differs from step 3 on)."""
    from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer

    torch.manual_seed(11)
    model = dm.DecodeStep().eval()
    rope_twin, flip_twin = copy.deepcopy(model), copy.deepcopy(model)
    dm.bad_rope_from(4, 1.5)(rope_twin)  # deeper_decode's twin
    dm.bad_rope_from(3, 3.0)(flip_twin)
    shape = (1, model.heads, model.max_seq, model.head_dim)
    example = (torch.tensor([[3]]), torch.tensor([0]), torch.zeros(shape), torch.zeros(shape))
    good = rt.export_and_lower(model, example)
    rope = rt.export_and_lower(rope_twin, example)
    flip = rt.export_and_lower(flip_twin, example)
    _same_maps(good, rope, "decode")
    _same_maps(good, flip, "decode")
    prompt = [3, 11]
    steps = {"base": _generate(good.buffer, prompt, 4, shape), "flip": _generate(flip.buffer, prompt, 4, shape),
             "deeper_decode": _generate(rope.buffer, prompt, 4, shape)}
    # deeper_decode's files must be this program's twin run: same step inputs as recorded there.
    recorded = torch.load(FIXTURES / "deeper_decode" / "step_inputs.pt", weights_only=True)
    for mine, theirs in zip(steps["deeper_decode"], recorded, strict=True):
        if not all(torch.equal(a, b) for a, b in zip(mine, theirs, strict=True)):
            raise RuntimeError("deeper_decode's step inputs are not this twin's: regenerate deeper_decode first")
    out_dir = out_root / "runs_decode"
    tokens = {}
    for name, program in (("base", good), ("flip", flip), ("deeper_decode", rope)):
        runs = steps[name]
        if name != "deeper_decode":
            (out_dir / name).mkdir(parents=True, exist_ok=True)
            rt.run_with_etdump(program.buffer, runs, out_dir / name, debug_buffer=True)
            torch.save([list(r) for r in runs], out_dir / name / "step_inputs.pt")
        # Each step's token: the argmax of the logits the program returns on that step's inputs (the
        # prompt steps' tokens too, though the next input is the prompt's).
        module = _load_for_executorch_from_buffer(program.buffer)
        tokens[name] = [int(module.run_method("forward", r)[0].argmax()) for r in runs]

    def first_difference(a: list[int], b: list[int]) -> int | None:
        return next((s for s, (x, y) in enumerate(zip(a, b)) if x != y), None)

    truth = {"generator": GENERATOR, "model": (dm.DecodeStep.__doc__ or "").splitlines()[0],
             "etrecord": "../deeper_decode/etrecord.bin (same seed: the same program)",
             "runs": {"base": "the correct model", "flip": "twin: rotary rows from position 3 on x3",
                      "deeper_decode": "../deeper_decode: twin, rotary rows from position 4 on x1.5"},
             "prompt": prompt, "steps": len(steps["base"]), "argmax_tokens": tokens,
             "first_token_step_differs": {name: first_difference(tokens["base"], t) for name, t in tokens.items()
                                          if name != "base"},
             "first_bad_step": {"flip": 3, "deeper_decode": 4}}
    (out_dir / "truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    return truth


BUILDERS = {"runs_mlp": build_mlp, "runs_decode": build_decode}


def main(argv: list[str] | None = None) -> int:
    return rt.build_main(__doc__.splitlines()[0], BUILDERS, FIXTURES, argv)


if __name__ == "__main__":
    raise SystemExit(main())
