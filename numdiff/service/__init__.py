"""``numdiff serve``: the numerical-debugging service for device labs and CI.

One job: keep uploaded runs and their analyses, and answer for them over HTTP. A thin layer over
the library: uploads go into a content-addressed store (:mod:`.store`, streamed by :mod:`.upload`),
metadata into SQL (:mod:`.db`, SQLite by default, PostgreSQL by URL, migrated with Alembic; every
query of the routes in :mod:`.crud`). Analysis jobs run in worker processes (:mod:`.worker`) that
run the stages of :mod:`numdiff.analysis.stages` in a child process with memory and wall-time
limits. The REST API (:mod:`.api`: routers and their dependencies) and the web pages (:mod:`.web`)
only read what the workers stored; :mod:`.app` puts them together. Clients: :mod:`numdiff.client`,
``numdiff submit``, ``numdiff runs show``, ``numdiff fetch-report``.

Needs the ``service`` extra: ``pip install -c constraints.txt -e '.[service]'``.
"""

from __future__ import annotations

__all__: list[str] = []
