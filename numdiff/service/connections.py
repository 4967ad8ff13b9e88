"""A connection guard for ``numdiff serve``: header and body timeouts and a cap on connections per client.

uvicorn closes a keep-alive connection that stays idle (``timeout_keep_alive``), but a fresh
connection that never sends a request, or one that trickles its headers or its body a byte at a
time, stays open as long as its client likes: 2,000 of them fill ``limit_concurrency`` and everyone
else gets 503 (issue 22, item 3). :func:`guarded_protocol` is uvicorn's h11 protocol with:

- a **header timeout**: a request's headers must be complete within ``timeout_s`` of the
  connection opening (or of the previous answer, on a kept-alive connection);
- a **body rate**: once the headers are in, the body must arrive at :data:`MIN_BODY_RATE` bytes a
  second on average after a grace of ``timeout_s`` (time the server itself stops reading, because
  the application is behind, is not counted against the client);
- a **cap per client address**: a connection beyond ``max_per_client`` open ones from the same
  address is closed at once.

A connection whose request is complete (the application is working, or a long poll is waiting)
has no deadline here. One timer sweeps every live connection twice a second.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["KEEP_ALIVE_S", "MIN_BODY_RATE", "SWEEP_S", "guarded_protocol"]

#: A kept-alive connection with no new request is closed after this many seconds (uvicorn's ``timeout_keep_alive``).
KEEP_ALIVE_S = 5
#: Bytes a second a request body must average (after the grace): slower is a trickle, and is closed.
MIN_BODY_RATE = 1024
#: How often the guard looks at every connection.
SWEEP_S = 0.5


class _Guarded(H11Protocol):
    """uvicorn's h11 protocol under the guard (the class attributes are set by :func:`guarded_protocol`)."""

    timeout_s: ClassVar[float] = 10.0
    max_per_client: ClassVar[int] = 100
    live: ClassVar[set[_Guarded]]
    per_client: ClassVar[Counter[str]]
    sweeping: ClassVar[list[asyncio.TimerHandle]]

    _phase: object  # one of h11's state sentinels
    _since: float
    _body_bytes: int
    _peer: str | None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        cls = type(self)
        self._phase, self._since, self._body_bytes, self._peer = h11.IDLE, time.monotonic(), 0, None
        peer = self.client[0] if self.client else None
        if peer is not None and cls.per_client[peer] >= cls.max_per_client:
            self.transport.close()  # over the cap: not counted, not watched
            return
        self._peer = peer
        if peer is not None:
            cls.per_client[peer] += 1
        cls.live.add(self)
        if not cls.sweeping:
            cls.sweeping.append(self.loop.call_later(SWEEP_S, cls.sweep))

    def connection_lost(self, exc: Exception | None) -> None:
        cls = type(self)
        if self in cls.live:
            cls.live.discard(self)
            if self._peer is not None:
                cls.per_client[self._peer] -= 1
                if cls.per_client[self._peer] <= 0:
                    del cls.per_client[self._peer]
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._phase is h11.SEND_BODY:
            self._body_bytes += len(data)
        super().data_received(data)

    def handle_events(self) -> None:
        super().handle_events()
        self._note_phase()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._phase, self._since = self.conn.their_state, time.monotonic()  # the next request's clock starts now

    def _note_phase(self) -> None:
        state = self.conn.their_state
        if state is not self._phase:
            self._phase, self._since, self._body_bytes = state, time.monotonic(), 0

    def overdue(self, t: float) -> bool:
        """Whether the client is too slow: headers past the timeout, or a body below the rate."""
        self._note_phase()
        if self._phase is h11.IDLE:
            return t - self._since > self.timeout_s
        if self._phase is h11.SEND_BODY:
            if self.flow.read_paused:  # we are not reading: the client is not to blame for that time
                self._since += SWEEP_S
                return False
            return t - self._since > self.timeout_s + self._body_bytes / MIN_BODY_RATE
        return False

    @classmethod
    def sweep(cls) -> None:
        cls.sweeping.clear()
        t = time.monotonic()
        for conn in list(cls.live):
            if not conn.transport.is_closing() and conn.overdue(t):
                conn.transport.close()
        if cls.live:
            loop = next(iter(cls.live)).loop
            cls.sweeping.append(loop.call_later(SWEEP_S, cls.sweep))


def guarded_protocol(timeout_s: float, max_per_client: int) -> type[H11Protocol]:
    """A protocol class for ``uvicorn.Config(http=...)`` with these limits (and its own bookkeeping)."""
    return type("GuardedH11Protocol", (_Guarded,), {"timeout_s": timeout_s, "max_per_client": max_per_client,
                                                    "live": set(), "per_client": Counter(), "sweeping": []})
