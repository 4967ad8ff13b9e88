"""``/docs``: the REST API's reference as one server-rendered page, built from the OpenAPI schema.

FastAPI's default ``/docs`` loads Swagger UI's script and stylesheet from a CDN: broken offline
(a lab's network often is), and a third party's script in a page of the service's origin. This
page needs nothing but numdiff: every path, its methods, summary, parameters and answers, from
``/openapi.json`` (which machines read, and which stays where it was). ReDoc (``/redoc``) is off.
"""

from __future__ import annotations

from typing import cast

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from numdiff.service.web.render import page

__all__ = ["router"]

router = APIRouter(include_in_schema=False)

_METHODS = ("get", "post", "put", "patch", "delete")
JsonObject = dict[str, object]


def _as_dict(value: object) -> JsonObject:
    return cast(JsonObject, value) if isinstance(value, dict) else {}


def _operations(spec: JsonObject) -> list[JsonObject]:
    """One row per (path, method): its summary, description, parameters and answers."""
    rows: list[JsonObject] = []
    for path, item in sorted(_as_dict(spec.get("paths")).items()):
        for method in _METHODS:
            op = _as_dict(_as_dict(item).get(method))
            if not op:
                continue
            params = [_as_dict(p) for p in cast(list[object], op.get("parameters") or [])]
            rows.append({"path": path, "method": method.upper(), "summary": op.get("summary", ""),
                         "description": op.get("description", ""),
                         "parameters": [(p.get("name", ""), p.get("in", ""), bool(p.get("required")),
                                         _as_dict(p.get("schema")).get("type", ""), p.get("description", ""))
                                        for p in params],
                         "body": bool(op.get("requestBody")),
                         "responses": sorted(_as_dict(op.get("responses")))})
    return rows


@router.get("/docs", response_class=HTMLResponse)
def api_docs(request: Request) -> HTMLResponse:
    spec = cast(JsonObject, request.app.openapi())
    info = _as_dict(spec.get("info"))
    return page("docs.html", title="API reference", info=info, operations=_operations(spec), signed_in=False)
