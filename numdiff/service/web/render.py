"""The pages' Jinja2 environment (autoescaped: text from uploads never reaches a page as markup)."""

from __future__ import annotations

from pathlib import Path

from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape

__all__ = ["page"]

_env = Environment(loader=FileSystemLoader(Path(__file__).parent.parent / "templates"), autoescape=select_autoescape(),
                   trim_blocks=True, lstrip_blocks=True)


def page(name: str, status_code: int = 200, **context: object) -> HTMLResponse:
    """Template ``name`` rendered; every page but the sign-in form shows a "Sign out" button unless told."""
    context.setdefault("signed_in", name != "login.html")
    return HTMLResponse(_env.get_template(name).render(**context), status_code=status_code)
