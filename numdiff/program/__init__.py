"""A serialized ExportedProgram -> a guarded, runnable fx graph.

The program JSON (and its pickled companions) that ExecuTorch writes into an ETRecord or a .pt2
archive is checked first (:mod:`~numdiff.program.guard`: allow-listed operators only, safe names,
bounded depth; :mod:`~numdiff.program.checks` for the shapes of the JSON), then built into a
``torch.export.ExportedProgram`` without ExecuTorch (:mod:`~numdiff.program.loader`), with torch's
own deserializer as the fallback. :mod:`~numdiff.program.graph_meta` reads node metadata from the
JSON without torch; :mod:`~numdiff.program.runnable` makes a module that runs.
"""
