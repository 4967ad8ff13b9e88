"""File formats: bytes <-> typed records, no torch needed to read them.

:mod:`~numdiff.schema.etdump` (the runtime's ETDump: records, reader, writer), :mod:`~numdiff.schema.debug_buffer`
(the intermediate-output buffer; tensors are made only when a value is inflated), :mod:`~numdiff.schema.etrecord`
(the ETRecord zip and its entries; its programs are built on first use by :mod:`numdiff.program`) and
:mod:`~numdiff.schema.pt2` (``torch.export.save`` archives: the one reader whose records are tensors, so it
imports torch).
"""
