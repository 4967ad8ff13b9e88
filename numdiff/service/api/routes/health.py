"""``GET /healthz``: the service answers and its database does."""

from __future__ import annotations

from fastapi import APIRouter

from numdiff.service import crud
from numdiff.service.api.deps import SessionDep

__all__ = ["router"]

router = APIRouter(tags=["service"])


@router.get("/healthz")
def healthz(session: SessionDep) -> dict[str, str]:
    crud.ping(session)
    return {"status": "ok"}
