"""The answers to the errors an upload raises: a file over the limit is 413, a malformed form 422."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from python_multipart.exceptions import MultipartParseError

from numdiff.service.store import TooLarge
from numdiff.service.upload import BadForm

__all__ = ["add_error_handlers"]


async def _too_large(_request: Request, exc: Exception) -> Response:
    return JSONResponse({"detail": f"a file of the upload is {exc} (NUMDIFF_SERVICE_MAX_UPLOAD_MB)"}, status_code=413)


async def _bad_form(_request: Request, exc: Exception) -> Response:
    return JSONResponse({"detail": f"bad upload: {exc}"}, status_code=422)


def add_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(TooLarge, _too_large)
    app.add_exception_handler(BadForm, _bad_form)
    app.add_exception_handler(MultipartParseError, _bad_form)
