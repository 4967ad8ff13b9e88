"""``numdiff serve``: the numerical-debugging service for device labs and CI.

A thin layer over the library: uploads go into a content-addressed store (:mod:`.store`),
metadata into SQL (:mod:`.db`, SQLite by default, PostgreSQL by URL, migrated with Alembic),
analysis jobs run in worker processes (:mod:`.jobs`) that call
:meth:`numdiff.report.Analysis.from_files` and :func:`numdiff.report.render_html` in a child
process with memory and wall-time limits. The REST API (:mod:`.app`) and the web pages
(:mod:`.web`) only read what the workers stored. Clients: :mod:`numdiff.client`,
``numdiff submit``, ``numdiff runs show``, ``numdiff fetch-report``.

Needs the ``service`` extra: ``pip install 'numdiff[service]'``.
"""

from __future__ import annotations

__all__: list[str] = []
