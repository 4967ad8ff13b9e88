"""The REST API (FastAPI): routers of short routes, one module per resource, and their dependencies.

Every ``/api/v1`` route needs ``Authorization: Bearer TOKEN`` (:mod:`.deps`); a token sees its own
project only (another project's run is 404, like a run that does not exist). Routes call
:mod:`numdiff.service.crud` for every query; uploads are stored, never parsed, here.
"""
