"""Build the ATen reference graph as a runnable ``fx.GraphModule`` straight from its JSON.

The numerical gap only needs to *run* the ATen graph, and the ETRecord's ``exported_program``
may not have been loaded yet. This builds it with numdiff's own program loader
(:func:`numdiff.program.loader.load_program`: the program guard first, operators from the
allow-list only, no torch deserializer, no ``torch._dynamo``) and turns it into a runnable module
with :func:`numdiff.program.runnable.runnable_module` (weights as attributes, user inputs flat,
outputs as a tuple). A program this route cannot handle (mutated buffers, custom objects, or one
the loader refuses) returns ``None``; the caller then loads the ETRecord's programs the usual way,
which raises the named error with the file. ``tests/capture/test_aten_builder.py`` checks both
routes capture the same values on every fixture.
"""

from __future__ import annotations

from typing import Any

import torch

from numdiff.program.graph_meta import ProgramLoadError

__all__ = ["build_aten_graph_module"]


def build_aten_graph_module(program: dict[str, Any], state_dict: bytes, constants: bytes) -> torch.fx.GraphModule | None:
    """A runnable module for a serialized ATen program, or None when it needs the usual route.

    The module takes the program's user inputs as flat positional arguments and returns its user
    outputs as a tuple; parameters, buffers and constants are attributes of the module.
    """
    from numdiff.program.loader import load_program
    from numdiff.program.runnable import runnable_module

    try:
        return runnable_module(load_program(program, state_dict, constants, b""))
    except (ProgramLoadError, KeyError, TypeError, ValueError, RuntimeError, AttributeError):
        # ProgramLoadError: refused or unreadable; the usual route raises it again, with the file named.
        return None
