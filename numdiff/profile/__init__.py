"""The profiling view: ETDump runs -> ``EventBlock`` / ``Event`` / ``PerfData`` and their DataFrames.

:mod:`~numdiff.profile.build` turns a parsed ETDump into event blocks (kept in columns until
records are asked for), :mod:`~numdiff.profile.symbolicate` links their events to the ETRecord's
graph (debug handles, op types, stack traces), :mod:`~numdiff.profile.frames` and
:mod:`~numdiff.profile.tables` give the reference's DataFrames and tables, and
:mod:`~numdiff.profile.op_list` the per-operator summary.
"""
