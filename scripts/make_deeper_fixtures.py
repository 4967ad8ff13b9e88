"""Write the deeper-localization fixtures (tests/fixtures/deeper_*/) with ExecuTorch 1.5.1.

Dev script, never run by CI (oracle virtualenv)::

    /root/.cache/numdiff-oracle/bin/python scripts/make_deeper_fixtures.py [--only NAME]

``deeper_quant``: a PT2E int8 model (XNNPACKQuantizer, per-tensor, portable + quantized kernels)
whose fc2 is made sensitive to weight quantization (an outlier weight column, see
``_deeper_models.SensitiveMLP``). The ETRecord and the program that runs are the quantized model;
``float_etrecord.bin`` is the float model exported the same way (the ``float_program=``).
``truth.json`` names the sensitive layer.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import warnings
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _deeper_models as dm  # noqa: E402
import _fixture_runtime as rt  # noqa: E402
from make_culprit_fixtures import _lower_quant  # noqa: E402
import _culprit_models as cm  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"
GENERATOR = {"executorch": "1.5.1", "torch": torch.__version__, "script": "scripts/make_deeper_fixtures.py"}


def build_quant(out_root: Path) -> dict[str, Any]:
    torch.manual_seed(7)
    model = dm.SensitiveMLP().eval()
    example = (torch.randn(4, 8),)
    spec = cm.CulpritSpec("deeper_quant", "", dm.SensitiveMLP, cm.nothing, (), (4, 8), lowering="quant_portable")
    quant = _lower_quant(model, example, spec, twin=False)
    out_dir = out_root / "deeper_quant"
    out_dir.mkdir(parents=True, exist_ok=True)
    rt.save_etrecord(quant, out_dir / "etrecord.bin", example)
    rt.run_with_etdump(quant.buffer, [example], out_dir, debug_buffer=True)
    float_lowered = rt.export_and_lower(model, example)
    rt.save_etrecord(float_lowered, out_dir / "float_etrecord.bin", example)
    truth = {"generator": GENERATOR, "model": dm.SensitiveMLP.__doc__.splitlines()[0] if dm.SensitiveMLP.__doc__ else "",
             "lowering": "quant_portable", "sensitive_layer": {"module": "fc2", "op": "linear"}}
    (out_dir / "truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    return truth


BUILDERS = {"deeper_quant": build_quant}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--out", type=Path, default=FIXTURES)
    args = parser.parse_args(argv)
    logging.getLogger().setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    for name, build in BUILDERS.items():
        if args.only and name not in args.only:
            continue
        print(f"{name}: {build(args.out)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
