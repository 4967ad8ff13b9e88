"""Security headers on every answer: no MIME sniffing, no framing by other sites, reports sandboxed.

Reports are HTML built from uploaded files; the ones served by the API and the pages carry
``Content-Security-Policy: sandbox allow-scripts``, so even opened directly (the run page's
"Open the report" link, not only its sandboxed iframe) a report runs in an opaque origin: its
scripts cannot read the session cookie or call the API as the visitor.
"""

from __future__ import annotations

import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["REPORT_CSP", "SecurityHeaders"]

#: The policy a report is served with (the run page frames it from the same origin).
REPORT_CSP = "sandbox allow-scripts; frame-ancestors 'self'"
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
                if report:
                    headers.append((b"content-security-policy", REPORT_CSP.encode()))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)
