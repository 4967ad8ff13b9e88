"""The REST API as one router: every resource's routes under it."""

from __future__ import annotations

from fastapi import APIRouter

from numdiff.service.api.routes import compare, health, models, projects, results, runs

__all__ = ["api_router"]

api_router = APIRouter()
for _module in (health, projects, models, runs, results, compare):
    api_router.include_router(_module.router)
