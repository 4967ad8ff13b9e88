"""The ASGI application: the REST API (OpenAPI at ``/openapi.json``, read as a page at ``/docs``, served by
numdiff itself: no CDN) and the web pages over one service state."""

from __future__ import annotations

from fastapi import Depends, FastAPI

from numdiff.service.api.deps import Service, refuse_nul
from numdiff.service.api.errors import add_error_handlers
from numdiff.service.api.headers import SecurityHeaders
from numdiff.service.api.main import api_router
from numdiff.service.settings import Settings
from numdiff.service.web.docs import router as docs_router
from numdiff.service.web.pages import add_page_answers
from numdiff.service.web.pages import router as pages_router

__all__ = ["create_app"]


def create_app(settings: Settings) -> FastAPI:
    """The ASGI application of one service instance (the schema must already be migrated)."""
    app = FastAPI(title="numdiff service", version="1",
                  description="Numerical debugging of ExecuTorch runs for device labs and CI: upload a run "
                              "(ETRecord, ETDump, debug buffer), get its per-layer SNR, culprits and HTML report, "
                              "compare runs.",
                  dependencies=[Depends(refuse_nul)], docs_url=None, redoc_url=None)
    app.state.service = Service(settings)
    add_error_handlers(app)
    add_page_answers(app)
    app.add_middleware(SecurityHeaders)
    app.include_router(api_router)
    app.include_router(pages_router)
    app.include_router(docs_router)
    return app
