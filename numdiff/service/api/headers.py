"""Security headers on every answer: no MIME sniffing, no framing by other sites, a strict CSP, reports sandboxed.

Every answer but a report carries :data:`PAGE_CSP`: nothing loads from another origin, no script
runs (the pages have none), styles come from the server's own style sheet only (never
``'unsafe-inline'``: a page holds no inline style), forms post to the server only, and only the
server's own reports may be framed.

Reports are HTML built from uploaded files; the ones served by the API and the pages carry
:data:`REPORT_CSP` (``sandbox allow-scripts``), so even opened directly (the run page's "Open the
report" link, not only its sandboxed iframe) a report runs in an opaque origin: its scripts cannot
read the session cookie or call the API as the visitor. Inside, the report's own policy allows its
one script and one style sheet by their SHA-256 (:mod:`numdiff.report.html`); both apply.
"""

from __future__ import annotations

import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["PAGE_CSP", "REPORT_CSP", "SecurityHeaders"]

#: The policy a report is served with (the run page frames it from the same origin).
REPORT_CSP = "sandbox allow-scripts; frame-ancestors 'self'; base-uri 'none'; form-action 'none'"
#: The policy of every other answer: the pages, /docs, the API.
PAGE_CSP = ("default-src 'none'; style-src 'self'; img-src 'self' data:; frame-src 'self'; form-action 'self'; "
            "base-uri 'none'; frame-ancestors 'none'")
_REPORT = re.compile(r"^/(?:ui/runs/[0-9]+/report|api/v1/runs/[0-9]+/report\.html)$")


class SecurityHeaders:
    """Pure ASGI middleware (streams untouched) adding the headers to every HTTP response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        report = bool(_REPORT.match(scope.get("path", "")))

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", [])
                           if k.lower() not in (b"x-frame-options", b"x-content-type-options")]
                headers += [(b"x-content-type-options", b"nosniff"),
                            (b"x-frame-options", b"SAMEORIGIN" if report else b"DENY"),
                            (b"referrer-policy", b"same-origin")]
                headers = [(k, v) for k, v in headers if k.lower() != b"content-security-policy"]
                headers.append((b"content-security-policy", (REPORT_CSP if report else PAGE_CSP).encode()))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)
