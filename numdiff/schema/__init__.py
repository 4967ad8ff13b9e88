"""File formats: bytes <-> typed records, no torch needed.

:mod:`~numdiff.schema.etdump` (the runtime's ETDump: records, reader, writer), :mod:`~numdiff.schema.debug_buffer`
(the intermediate-output buffer), :mod:`~numdiff.schema.etrecord` (the ETRecord zip and its entries) and
:mod:`~numdiff.schema.pt2` (``torch.export.save`` archives). Programs inside these files are built by
:mod:`numdiff.program`; torch is imported only when a tensor or a program is actually read.
"""
