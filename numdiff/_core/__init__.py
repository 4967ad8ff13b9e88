"""Small things every stage shares, each defined once: domain aliases (debug handles, program outputs,
JSON), the ETRecord protocol, event-kind and time-unit constants, depth-checked JSON parsing, atomic
file writes, the cyclic-collector pause and note counting.

Nothing here imports another numdiff package except :mod:`numdiff.errors` and :mod:`numdiff.limits`,
so any package may import from ``_core`` without a cycle.
"""
