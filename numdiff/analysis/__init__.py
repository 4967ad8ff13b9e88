"""The one saved result of numdiff and how it is built: the records and :class:`~numdiff.analysis.models.Analysis`,
the one pipeline that builds it (stages), its file on disk (migrations, storage), and the figures read from it
(the diff of two analyses, the noise floor, the doctor's checks).
"""
