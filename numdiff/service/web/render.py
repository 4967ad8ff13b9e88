"""The pages' Jinja2 environment (autoescaped: text from uploads never reaches a page as markup) and style sheet.

The pages hold no inline script or style: their look is one style sheet served by numdiff
(``/static/pages.css``), so their Content-Security-Policy (``numdiff.service.api.headers``) allows
styles from the server itself only, never ``'unsafe-inline'``.
"""

from __future__ import annotations

from pathlib import Path

from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape

__all__ = ["STYLESHEET", "page"]

_TEMPLATES = Path(__file__).parent.parent / "templates"
_env = Environment(loader=FileSystemLoader(_TEMPLATES), autoescape=select_autoescape(),
                   trim_blocks=True, lstrip_blocks=True)

#: The pages' one style sheet (``/static/pages.css``).
STYLESHEET = (_TEMPLATES / "pages.css").read_text(encoding="utf-8")


def page(name: str, status_code: int = 200, **context: object) -> HTMLResponse:
    """Template ``name`` rendered; every page but the sign-in form shows a "Sign out" button unless told."""
    context.setdefault("signed_in", name != "login.html")
    return HTMLResponse(_env.get_template(name).render(**context), status_code=status_code)
